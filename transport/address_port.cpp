#include "transport/address_port.hpp"

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "transport/cm_events.hpp"
#include "transport/setup_step.hpp"
#include "transport/verbs_raii.hpp"

namespace pg_rdma::transport {

int mtu_bytes(int ibv_mtu_value) noexcept {
    switch (ibv_mtu_value) {
        case IBV_MTU_256: return 256;
        case IBV_MTU_512: return 512;
        case IBV_MTU_1024: return 1024;
        case IBV_MTU_2048: return 2048;
        case IBV_MTU_4096: return 4096;
        default: return 0;
    }
}

bool rdma_port_of_address(const sockaddr* local, AddressPort& out, Error& err) noexcept {
    try {
        sockaddr_storage bind_to{};
        const std::size_t len = local->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
        std::memcpy(&bind_to, local, len);
        if (bind_to.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&bind_to)->sin_port = 0;
        else if (bind_to.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&bind_to)->sin6_port = 0;
        else return fail(err, EAFNOSUPPORT, "not an IP address");
        const CmChannelPtr channel(rdma_create_event_channel());
        if (!channel) return fail_errno(err, errno, "rdma_create_event_channel");
        rdma_cm_id* raw = nullptr;
        if (rdma_create_id(channel.get(), &raw, nullptr, RDMA_PS_TCP) != 0)
            return fail_errno(err, errno, "rdma_create_id");
        // Destroyed before the channel it reports to (declared after it).
        const CmIdPtr id(raw);
        const auto* address = reinterpret_cast<sockaddr*>(&bind_to);
        if (rdma_bind_addr(id.get(), const_cast<sockaddr*>(address)) != 0)
            return fail_errno(err, errno, fmt::format("rdma_bind_addr({})", format_address(address)));
        if (id->verbs == nullptr)
            return fail(err, ENODEV,
                        fmt::format("rdma_bind_addr({}): the address is not on an RDMA device", format_address(address)));
        out.device = ibv_get_device_name(id->verbs->device);
        out.port = id->port_num;
        ibv_port_attr attr{};
        if (ibv_query_port(id->verbs, id->port_num, &attr) != 0) return fail_errno(err, errno, "ibv_query_port");
        out.active = attr.state == IBV_PORT_ACTIVE;
        out.state = ibv_port_state_str(attr.state);
        out.mtu = mtu_bytes(attr.active_mtu);
        out.ethernet = attr.link_layer == IBV_LINK_LAYER_ETHERNET;
        return true;
    } catch (...) {
        fail_from_exception(err, "rdma_port_of_address");
        return false;
    }
}

}  // namespace pg_rdma::transport
