#include "perf/endpoint.hpp"

#include <netdb.h>
#include <netinet/in.h>

#include <cstring>
#include <memory>

#include "perf/bench_error.hpp"

namespace pg_rdma::perf {

Endpoint parse_endpoint(const std::string& ip, std::uint16_t port)
{
    addrinfo hints{};
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(ip.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (rc != 0)
        throw BenchError("address '" + ip + "': " + ::gai_strerror(rc));
    const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owner(found, ::freeaddrinfo);
    Endpoint ep;
    std::memcpy(&ep.addr, found->ai_addr, found->ai_addrlen);
    ep.addr_len = found->ai_addrlen;
    return ep;
}

std::uint16_t port_of(const sockaddr_storage& addr)
{
    if (addr.ss_family == AF_INET6)
        return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
    return ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
}

}  // namespace pg_rdma::perf
