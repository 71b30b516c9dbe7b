// Which driver serves each RDMA device (see rdma_netlink.hpp).
#include "transport/rdma_netlink.hpp"

#include <linux/netlink.h>
#include <rdma/rdma_netlink.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "transport/event_set.hpp"

namespace pg_rdma::transport {
namespace rdma_netlink_detail {
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
            // Its status says whether the dump was whole (a negative errno
            // if it was cut short).
            if (attributes.size() < sizeof(int) || read_at<int>(attributes, 0) < 0) return false;
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

}  // namespace rdma_netlink_detail

namespace {

using namespace rdma_netlink_detail;

// A reply from the kernel comes at once; this only bounds a kernel that
// never answers (the preload is an optimisation: give up, do not wait).
constexpr timeval kNetlinkReplyTimeout{1, 0};
constexpr std::size_t kDatagramBytes = 16 * 1024;  // a dump's datagram holds a few devices
// Only guards against a dump that never ends: real hosts stay far below
// it, SR-IOV included (a device per virtual function, up to 127 on one
// ConnectX port, all visible in rdma's default shared namespace mode).
constexpr std::size_t kMaxDevices = 4096;

bool send_request(int fd, const std::vector<std::uint8_t>& req) {
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    return sendto(fd, req.data(), req.size(), 0, reinterpret_cast<const sockaddr*>(&kernel), sizeof kernel) ==
           static_cast<ssize_t>(req.size());
}

std::optional<std::span<const std::uint8_t>> receive(int fd, std::array<std::uint8_t, kDatagramBytes>& buf) {
    ssize_t n = 0;
    // With SO_RCVTIMEO a signal ends recv() with EINTR even under SA_RESTART.
    do n = recv(fd, buf.data(), buf.size(), MSG_TRUNC);
    while (n < 0 && errno == EINTR);
    if (n <= 0 || static_cast<std::size_t>(n) > buf.size()) return std::nullopt;  // error, or cut short
    return std::span<const std::uint8_t>(buf.data(), static_cast<std::size_t>(n));
}

}  // namespace

std::optional<std::vector<std::uint32_t>> rdma_device_drivers() {
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
        if (std::find(drivers.begin(), drivers.end(), *id) == drivers.end()) drivers.push_back(*id);
    }
    return drivers;
}

}  // namespace pg_rdma::transport

