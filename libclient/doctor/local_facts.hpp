// What this host brings to an RDMA session, as `pgrdma doctor` reports it:
// the RDMA devices and their ports, whether a provider library loads for
// each, the limits a session runs into, and which device rdma_cm picks for
// the route to the server.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace pg_rdma::doctor {

struct PortFacts {
    std::string device;
    int port = 0;
    std::string state;       // "ACTIVE", "DOWN", ...
    bool active = false;
    int mtu = 0;             // active MTU, bytes
    std::string link_layer;  // "Ethernet" (RoCE) or "InfiniBand"
    std::string netdev;      // RoCE: the network device under the port
};

struct DeviceFacts {
    std::vector<std::string> in_sysfs;          // /sys/class/infiniband
    std::vector<std::string> without_provider;  // in sysfs, but no verbs library lists them
    std::vector<std::string> unopenable;        // listed, but ibv_open_device fails (with why)
    std::vector<PortFacts> ports;
};

struct LimitFacts {
    std::uint64_t memlock = 0;         // bytes, RLIM_INFINITY as is
    bool memlock_unlimited = false;
    std::uint64_t session_pins = 0;    // bytes of memlock one session needs (its buffers, the verbs' own)
    std::uint64_t descriptors = 0;     // RLIMIT_NOFILE, soft
};

struct RouteFacts {
    bool resolved = false;
    std::string error;        // !resolved: why not
    std::string device;       // resolved: rdma_cm's choice
    int port = 0;
    std::string source;       // the local address rdma_cm takes
    std::string gid_type;     // "RoCE v2", "RoCE v1", "IB" or empty
    int mtu = 0;              // that port's active MTU
    std::string egress;       // the network device the IP route leaves by, when known
};

DeviceFacts gather_devices();
LimitFacts gather_limits();
// Resolves the address and route to `server` as a session's connection
// would: from `source` (the probe's TCP connection's local address; port
// ignored; nullptr: the kernel's choice), by `until`.
RouteFacts resolve_route(const sockaddr* server, const sockaddr* source, std::chrono::steady_clock::time_point until);

// "10.0.0.5", "fe80::1" (no port).
std::string numeric_host(const sockaddr* address);

}  // namespace pg_rdma::doctor
