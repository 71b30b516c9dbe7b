#include "libclient/doctor/local_facts.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "transport/address_port.hpp"
#include "transport/endpoint.hpp"
#include "transport/pinned_buffer.hpp"
#include "transport/provider_preload.hpp"
#include "transport/settings.hpp"
#include "transport/setup_step.hpp"
#include "transport/verbs_raii.hpp"

namespace pg_rdma::doctor {
namespace {

namespace fs = std::filesystem;
const fs::path kSysfsDevices = "/sys/class/infiniband";

std::string read_line(const fs::path& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

struct DeviceListDeleter {
    void operator()(ibv_device** list) const { ibv_free_device_list(list); }
};
struct ContextDeleter {
    void operator()(ibv_context* c) const { ibv_close_device(c); }
};

void add_ports(ibv_device* device, DeviceFacts& facts) {
    std::vector<PortFacts>& out = facts.ports;
    const std::unique_ptr<ibv_context, ContextDeleter> context(ibv_open_device(device));
    if (!context) {
        facts.unopenable.push_back(std::string(ibv_get_device_name(device)) + " (" + strerror(errno) + ")");
        return;
    }
    ibv_device_attr attr{};
    if (ibv_query_device(context.get(), &attr) != 0) return;
    for (int p = 1; p <= attr.phys_port_cnt; ++p) {
        ibv_port_attr port{};
        if (ibv_query_port(context.get(), static_cast<std::uint8_t>(p), &port) != 0) continue;
        PortFacts f;
        f.device = ibv_get_device_name(device);
        f.port = p;
        f.state = ibv_port_state_str(port.state);
        f.active = port.state == IBV_PORT_ACTIVE;
        f.mtu = transport::mtu_bytes(port.active_mtu);
        f.link_layer = port.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand";
        f.netdev = read_line(kSysfsDevices / f.device / "ports" / std::to_string(p) / "gid_attrs" / "ndevs" / "0");
        out.push_back(std::move(f));
    }
}

// The GID rdma_cm uses for `source` on that port: the entry holding the
// address (IPv4-mapped for IPv4), RoCE v2 where the table has both.
std::string gid_type_for(const std::string& device, int port, const sockaddr* source) {
    in6_addr wanted{};
    if (source->sa_family == AF_INET) {
        wanted.s6_addr[10] = 0xff;
        wanted.s6_addr[11] = 0xff;
        std::memcpy(&wanted.s6_addr[12], &reinterpret_cast<const sockaddr_in*>(source)->sin_addr, 4);
    } else if (source->sa_family == AF_INET6) {
        wanted = reinterpret_cast<const sockaddr_in6*>(source)->sin6_addr;
    }
    const fs::path dir = kSysfsDevices / device / "ports" / std::to_string(port);
    std::string found;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir / "gids", ec)) {
        in6_addr gid{};
        if (inet_pton(AF_INET6, read_line(entry.path()).c_str(), &gid) != 1) continue;
        if (std::memcmp(&gid, &wanted, sizeof gid) != 0) continue;
        const std::string type = read_line(dir / "gid_attrs" / "types" / entry.path().filename());
        if (type == "RoCE v2") return type;
        if (found.empty()) found = type;
    }
    return found;
}

// The network device the kernel's IP route to `server` leaves by: a UDP
// socket connected there learns its source address, whose interface it is.
std::string egress_device(const sockaddr* server) {
    const int fd = ::socket(server->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return {};
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    const bool ok = ::connect(fd, server, server->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6)) == 0 &&
                    ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
    ::close(fd);
    if (!ok) return {};
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return {};
    std::string name;
    const std::string wanted = numeric_host(reinterpret_cast<const sockaddr*>(&local));
    for (const ifaddrs* i = list; i != nullptr && name.empty(); i = i->ifa_next)
        if (i->ifa_addr != nullptr && i->ifa_addr->sa_family == local.ss_family && numeric_host(i->ifa_addr) == wanted)
            name = i->ifa_name;
    freeifaddrs(list);
    return name.empty() ? name : name + " (" + wanted + ")";
}


// The next event on `channel` by `until`; false with errno.
bool next_event(rdma_event_channel* channel, std::chrono::steady_clock::time_point until, rdma_cm_event_type& type,
                int& status) {
    pollfd p{channel->fd, POLLIN, 0};
    const int n = ::poll(&p, 1, transport::ms_until(until));
    if (n == 0) return errno = ETIMEDOUT, false;
    if (n < 0) return false;
    rdma_cm_event* event = nullptr;
    if (rdma_get_cm_event(channel, &event) != 0) return false;
    type = event->event;
    status = event->status;
    rdma_ack_cm_event(event);
    return true;
}

}  // namespace

std::string numeric_host(const sockaddr* address) {
    char host[NI_MAXHOST] = {};
    const socklen_t len = address->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (getnameinfo(address, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0) return "?";
    return host;
}

DeviceFacts gather_devices() {
    DeviceFacts facts;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(kSysfsDevices, ec)) facts.in_sysfs.push_back(entry.path().filename());
    std::sort(facts.in_sysfs.begin(), facts.in_sysfs.end());
    // As a session would: only the providers these devices need.
    transport::preload_device_providers();
    int count = 0;
    const std::unique_ptr<ibv_device*, DeviceListDeleter> list(ibv_get_device_list(&count));
    std::vector<std::string> opened;
    for (int i = 0; list && i < count; ++i) {
        opened.emplace_back(ibv_get_device_name(list.get()[i]));
        add_ports(list.get()[i], facts);
    }
    for (const std::string& name : facts.in_sysfs)
        if (std::find(opened.begin(), opened.end(), name) == opened.end()) facts.without_provider.push_back(name);
    return facts;
}

LimitFacts gather_limits() {
    LimitFacts facts;
    rlimit r{};
    if (getrlimit(RLIMIT_MEMLOCK, &r) == 0) {
        facts.memlock_unlimited = r.rlim_cur == RLIM_INFINITY;
        facts.memlock = r.rlim_cur;
    }
    if (getrlimit(RLIMIT_NOFILE, &r) == 0) facts.descriptors = r.rlim_cur;
    facts.session_pins = transport::Endpoint::pinned_bytes(transport::Settings{}) + transport::kVerbsOverheadBytes;
    return facts;
}

RouteFacts resolve_route(const sockaddr* server, const sockaddr* source, std::chrono::steady_clock::time_point until) {
    RouteFacts facts;
    facts.egress = egress_device(server);
    const transport::CmChannelPtr channel(rdma_create_event_channel());
    if (!channel) return facts.error = std::string("rdma_create_event_channel: ") + strerror(errno), facts;
    rdma_cm_id* raw = nullptr;
    if (rdma_create_id(channel.get(), &raw, nullptr, RDMA_PS_TCP) != 0)
        return facts.error = std::string("rdma_create_id: ") + strerror(errno), facts;
    // Destroyed before the channel it reports to (declared after it).
    const transport::CmIdPtr id(raw);
    rdma_cm_event_type type{};
    int status = 0;
    sockaddr_storage from{};
    if (source != nullptr && source->sa_family == server->sa_family) {
        std::memcpy(&from, source, source->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
        if (from.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&from)->sin_port = 0;
        else reinterpret_cast<sockaddr_in6*>(&from)->sin6_port = 0;
    }
    sockaddr* const src = from.ss_family != 0 ? reinterpret_cast<sockaddr*>(&from) : nullptr;
    if (rdma_resolve_addr(id.get(), src, const_cast<sockaddr*>(server), std::max(transport::ms_until(until), 1)) != 0)
        return facts.error = std::string("rdma_resolve_addr: ") + strerror(errno), facts;
    if (!next_event(channel.get(), until, type, status))
        return facts.error = std::string("resolving the address: ") + strerror(errno), facts;
    if (type != RDMA_CM_EVENT_ADDR_RESOLVED)
        return facts.error = std::string("rdma_cm could not resolve the address (") + rdma_event_str(type) +
                             (status != 0 ? std::string(": ") + strerror(status < 0 ? -status : status) : "") + ")",
               facts;
    if (id->verbs == nullptr) return facts.error = "the address resolved to no RDMA device", facts;
    facts.device = ibv_get_device_name(id->verbs->device);
    facts.port = id->port_num;
    const sockaddr* bound = rdma_get_local_addr(id.get());
    facts.source = numeric_host(bound);
    facts.gid_type = gid_type_for(facts.device, facts.port, bound);
    ibv_port_attr port{};
    if (ibv_query_port(id->verbs, id->port_num, &port) == 0) facts.mtu = transport::mtu_bytes(port.active_mtu);
    if (rdma_resolve_route(id.get(), std::max(transport::ms_until(until), 1)) != 0)
        return facts.error = std::string("rdma_resolve_route: ") + strerror(errno), facts;
    if (!next_event(channel.get(), until, type, status))
        return facts.error = std::string("resolving the route: ") + strerror(errno), facts;
    if (type != RDMA_CM_EVENT_ROUTE_RESOLVED)
        return facts.error = std::string("rdma_cm could not resolve the route (") + rdma_event_str(type) + ")", facts;
    facts.resolved = true;
    return facts;
}

}  // namespace pg_rdma::doctor
