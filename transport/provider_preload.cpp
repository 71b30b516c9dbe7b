// Loading only the providers this host's devices need (see provider_preload.hpp).
#include "transport/provider_preload.hpp"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>
#include <linux/netlink.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/rdma_netlink.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <string>

#include "transport/event_set.hpp"

namespace pg_rdma::transport {
namespace provider_preload_detail {
namespace {

constexpr std::uint16_t kDeviceGet = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET);
constexpr std::uint16_t kChardevGet = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET_CHARDEV);
constexpr char kUverbs[] = "uverbs";  // the character device whose driver id libibverbs matches on

template <typename T>
T read_at(std::span<const std::uint8_t> bytes, std::size_t at) {
    T v;
    std::memcpy(&v, bytes.data() + at, sizeof v);
    return v;
}

template <typename T>
void append(std::vector<std::uint8_t>& out, const T& v) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    out.insert(out.end(), p, p + sizeof v);
}

void append_attribute(std::vector<std::uint8_t>& out, std::uint16_t type, const void* payload, std::size_t size) {
    const nlattr header{static_cast<std::uint16_t>(NLA_HDRLEN + size), type};
    append(out, header);
    const auto* p = static_cast<const std::uint8_t*>(payload);
    out.insert(out.end(), p, p + size);
    out.resize(NLA_ALIGN(out.size()), 0);
}

std::vector<std::uint8_t> request(std::uint16_t type, std::uint16_t flags, std::uint32_t seq) {
    std::vector<std::uint8_t> out;
    append(out, nlmsghdr{NLMSG_HDRLEN, type, static_cast<std::uint16_t>(NLM_F_REQUEST | flags), seq, 0});
    return out;
}

void finish(std::vector<std::uint8_t>& out) {
    const auto len = static_cast<std::uint32_t>(out.size());
    std::memcpy(out.data() + offsetof(nlmsghdr, nlmsg_len), &len, sizeof len);
}

// Calls on_message(type, attributes of the message) for each message of a
// datagram; false when a length does not fit, or on_message says stop.
template <typename OnMessage>
bool for_each_message(std::span<const std::uint8_t> datagram, OnMessage on_message) {
    std::size_t at = 0;
    while (at + NLMSG_HDRLEN <= datagram.size()) {
        const auto header = read_at<nlmsghdr>(datagram, at);
        if (header.nlmsg_len < NLMSG_HDRLEN || header.nlmsg_len > datagram.size() - at) return false;
        if (!on_message(header.nlmsg_type, datagram.subspan(at + NLMSG_HDRLEN, header.nlmsg_len - NLMSG_HDRLEN)))
            return false;
        at += NLMSG_ALIGN(header.nlmsg_len);
    }
    return at >= datagram.size();
}

// The payload of attribute `wanted` in a message's attributes (rdma
// netlink messages carry no family header), or an empty span when it is
// absent; nothing when the attributes are malformed.
std::optional<std::span<const std::uint8_t>> find_attribute(std::span<const std::uint8_t> attributes,
                                                             std::uint16_t wanted) {
    std::span<const std::uint8_t> found;
    std::size_t at = 0;
    while (at + NLA_HDRLEN <= attributes.size()) {
        const auto header = read_at<nlattr>(attributes, at);
        if (header.nla_len < NLA_HDRLEN || header.nla_len > attributes.size() - at) return std::nullopt;
        if ((header.nla_type & NLA_TYPE_MASK) == wanted)
            found = attributes.subspan(at + NLA_HDRLEN, header.nla_len - NLA_HDRLEN);
        at += NLA_ALIGN(header.nla_len);
    }
    return found;
}

}  // namespace

std::optional<std::string_view> provider_for_driver(std::uint32_t driver_id) noexcept {
    // The kernel's enum rdma_driver_id (a stable UAPI) to the provider that
    // rdma-core's configuration names for it (/etc/libibverbs.d/*.driver).
    // Drivers with no provider in rdma-core (cxgb3, nes, usnic) and ids newer
    // than these headers are unknown: libibverbs then loads them all.
    switch (driver_id) {
        case RDMA_DRIVER_MLX5: return "mlx5";
        case RDMA_DRIVER_MLX4: return "mlx4";
        case RDMA_DRIVER_CXGB4: return "cxgb4";
        case RDMA_DRIVER_MTHCA: return "mthca";
        case RDMA_DRIVER_BNXT_RE: return "bnxt_re";
        case RDMA_DRIVER_OCRDMA: return "ocrdma";
        case RDMA_DRIVER_IRDMA: return "irdma";
        case RDMA_DRIVER_VMW_PVRDMA: return "vmw_pvrdma";
        case RDMA_DRIVER_QEDR: return "qedr";
        case RDMA_DRIVER_HNS: return "hns";
        case RDMA_DRIVER_RXE: return "rxe";
        case RDMA_DRIVER_HFI1: return "hfi1verbs";
        case RDMA_DRIVER_QIB: return "ipathverbs";
        case RDMA_DRIVER_EFA: return "efa";
        case RDMA_DRIVER_SIW: return "siw";
        case RDMA_DRIVER_ERDMA: return "erdma";
        default: return std::nullopt;
    }
}

std::vector<std::uint8_t> device_dump_request(std::uint32_t seq) {
    auto out = request(kDeviceGet, NLM_F_DUMP, seq);
    finish(out);
    return out;
}

std::vector<std::uint8_t> driver_request(std::uint32_t index, std::uint32_t seq) {
    auto out = request(kChardevGet, 0, seq);
    append_attribute(out, RDMA_NLDEV_ATTR_DEV_INDEX, &index, sizeof index);
    append_attribute(out, RDMA_NLDEV_ATTR_CHARDEV_TYPE, kUverbs, sizeof kUverbs);
    finish(out);
    return out;
}

bool read_device_dump(std::span<const std::uint8_t> datagram, std::vector<std::uint32_t>& indexes, bool& done) {
    return for_each_message(datagram, [&](std::uint16_t type, std::span<const std::uint8_t> attributes) {
        if (type == NLMSG_DONE) {
            done = true;
            return true;
        }
        if (type == NLMSG_NOOP) return true;
        if (type != kDeviceGet) return false;  // NLMSG_ERROR among them
        const auto index = find_attribute(attributes, RDMA_NLDEV_ATTR_DEV_INDEX);
        if (!index || index->size() != sizeof(std::uint32_t)) return false;
        indexes.push_back(read_at<std::uint32_t>(*index, 0));
        return true;
    });
}

std::optional<std::uint32_t> read_driver_id(std::span<const std::uint8_t> datagram) {
    std::optional<std::uint32_t> id;
    const bool ok = for_each_message(datagram, [&](std::uint16_t type, std::span<const std::uint8_t> attributes) {
        if (type != kChardevGet) return false;
        const auto payload = find_attribute(attributes, RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID);
        if (!payload) return false;
        // The kernel puts a u32 where its header's comment says u64; either.
        if (payload->size() == sizeof(std::uint32_t)) id = read_at<std::uint32_t>(*payload, 0);
        if (payload->size() == sizeof(std::uint64_t)) {
            const auto wide = read_at<std::uint64_t>(*payload, 0);
            if (wide <= UINT32_MAX) id = static_cast<std::uint32_t>(wide);
        }
        return id.has_value();
    });
    return ok ? id : std::nullopt;
}

}  // namespace provider_preload_detail

namespace {

using namespace provider_preload_detail;

// A reply from the kernel comes at once; this only bounds a kernel that
// never answers (the preload is an optimisation: give up, do not wait).
constexpr timeval kNetlinkReplyTimeout{1, 0};
constexpr std::size_t kDatagramBytes = 16 * 1024;  // a dump's datagram holds a few devices
constexpr std::size_t kMaxDevices = 64;              // more than any host has; beyond, give up

bool send_request(int fd, const std::vector<std::uint8_t>& req) {
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    return sendto(fd, req.data(), req.size(), 0, reinterpret_cast<const sockaddr*>(&kernel), sizeof kernel) ==
           static_cast<ssize_t>(req.size());
}

std::optional<std::span<const std::uint8_t>> receive(int fd, std::array<std::uint8_t, kDatagramBytes>& buf) {
    const ssize_t n = recv(fd, buf.data(), buf.size(), MSG_TRUNC);
    if (n <= 0 || static_cast<std::size_t>(n) > buf.size()) return std::nullopt;  // error, or cut short
    return std::span<const std::uint8_t>(buf.data(), static_cast<std::size_t>(n));
}

// The driver id of every RDMA device, or nothing when the kernel would not
// say for one of them.
std::optional<std::vector<std::uint32_t>> device_drivers() {
    const FileDescriptor fd(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_RDMA));
    if (!fd.valid()) return std::nullopt;
    if (setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &kNetlinkReplyTimeout, sizeof kNetlinkReplyTimeout) != 0)
        return std::nullopt;
    std::array<std::uint8_t, kDatagramBytes> buf;
    std::uint32_t seq = 1;
    if (!send_request(fd.get(), device_dump_request(seq))) return std::nullopt;
    std::vector<std::uint32_t> indexes;
    for (bool done = false; !done;) {
        const auto datagram = receive(fd.get(), buf);
        if (!datagram || !read_device_dump(*datagram, indexes, done) || indexes.size() > kMaxDevices)
            return std::nullopt;
    }
    std::vector<std::uint32_t> drivers;
    for (const std::uint32_t index : indexes) {
        if (!send_request(fd.get(), driver_request(index, ++seq))) return std::nullopt;
        const auto datagram = receive(fd.get(), buf);
        const auto id = datagram ? read_driver_id(*datagram) : std::nullopt;
        if (!id) return std::nullopt;
        drivers.push_back(*id);
    }
    return drivers;
}

// Where libibverbs looks for providers: "libibverbs" beside the loaded
// libibverbs.so (how rdma-core installs them on Debian, Fedora and SUSE;
// anywhere else no file is found and nothing is preloaded).
std::optional<std::string> provider_directory() {
    std::string library;
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* out) {
            const std::string_view name = info->dlpi_name != nullptr ? info->dlpi_name : "";
            const auto slash = name.rfind('/');
            if (slash == std::string_view::npos || !name.substr(slash + 1).starts_with("libibverbs.so")) return 0;
            *static_cast<std::string*>(out) = std::string(name.substr(0, slash));
            return 1;
        },
        &library);
    if (library.empty()) return std::nullopt;
    return library + "/libibverbs";
}

// The one provider file of `provider` ("lib<name>-rdmav<ABI>.so"), or
// nothing when there is none or more than one.
std::optional<std::string> provider_file(const std::string& directory, std::string_view provider) {
    const std::string pattern = directory + "/lib" + std::string(provider) + "-rdmav*.so";
    glob_t found{};
    std::optional<std::string> path;
    if (glob(pattern.c_str(), GLOB_NOSORT, nullptr, &found) == 0 && found.gl_pathc == 1) path = found.gl_pathv[0];
    globfree(&found);
    return path;
}

void preload(const std::string& directory) {
    const auto drivers = device_drivers();
    if (!drivers || drivers->empty()) return;
    std::vector<std::string> files;
    for (const std::uint32_t id : *drivers) {
        const auto provider = provider_for_driver(id);
        if (!provider) return;
        auto file = provider_file(directory, *provider);
        if (!file) return;
        files.push_back(std::move(*file));
    }
    // Loaded as libibverbs loads them; never unloaded, as theirs are not.
    // Its constructor registers the provider with libibverbs.
    for (const std::string& file : files) (void)dlopen(file.c_str(), RTLD_NOW);
}

std::atomic<bool> g_attempted{false};

}  // namespace

void preload_device_providers() noexcept {
    if (g_attempted.load(std::memory_order_acquire)) return;
    try {
        // Not yet loaded (libpq_rdma.so loads it on first use): a later call
        // tries again.
        const auto directory = provider_directory();
        if (!directory || g_attempted.exchange(true, std::memory_order_acq_rel)) return;
        preload(*directory);
    } catch (...) {
        // Out of memory: libibverbs loads every provider, as without this.
    }
}

}  // namespace pg_rdma::transport
