// Which RDMA device and port own a local IP address, found as rdma_cm finds
// them when a listener binds it. For checks (the server's
// pg_rdma_check_server(), pgrdma doctor), not for sessions: it opens and
// closes an rdma_cm id of its own.
#pragma once

#include <sys/socket.h>

#include <string>

#include "transport/error.hpp"

namespace pg_rdma::transport {

struct AddressPort {
    std::string device;
    int port = 0;
    bool active = false;
    std::string state;       // "active", "down", ... (ibv_port_state_str)
    int mtu = 0;             // active MTU, bytes
    bool ethernet = false;   // RoCE (else InfiniBand)
};

// The port behind `local` (its port number is ignored). false with err:
// ENODEV when the address is not on an RDMA device, or the rdma_cm error.
bool rdma_port_of_address(const sockaddr* local, AddressPort& out, Error& err) noexcept;

// ibv_mtu as bytes (0 for a value outside the enum).
int mtu_bytes(int ibv_mtu_value) noexcept;

}  // namespace pg_rdma::transport
