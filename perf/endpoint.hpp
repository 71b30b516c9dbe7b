// Where the benchmark listens or connects: a numeric IP address and a port,
// parsed once from the command line for both transports.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>

namespace pg_rdma::perf {

struct Endpoint {
    sockaddr_storage addr{};
    socklen_t addr_len = 0;

    [[nodiscard]] const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&addr); }
};

// Numeric IPv4 or IPv6 address only: the benchmark must never resolve names
// into addresses it did not mean. Throws BenchError.
Endpoint parse_endpoint(const std::string& ip, std::uint16_t port);
// The port of a bound IPv4/IPv6 address, host byte order.
std::uint16_t port_of(const sockaddr_storage& addr);

}  // namespace pg_rdma::perf
