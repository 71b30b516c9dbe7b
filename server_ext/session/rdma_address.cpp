#include "server_ext/session/rdma_address.hpp"

#include <netdb.h>
#include <netinet/in.h>

#include <cstring>

namespace pg_rdma::server {
namespace {

bool same_ip(const sockaddr* a, const sockaddr* b) {
    if (a->sa_family != b->sa_family) return false;
    if (a->sa_family == AF_INET)
        return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
               reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
    if (a->sa_family == AF_INET6)
        return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                           &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
    return false;
}

bool resolves_to(const std::string& item, const sockaddr* local) {
    addrinfo hints{};
    hints.ai_family = local->sa_family;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(item.c_str(), nullptr, &hints, &found) != 0) return false;
    bool match = false;
    for (const addrinfo* ai = found; ai != nullptr && !match; ai = ai->ai_next) match = same_ip(ai->ai_addr, local);
    freeaddrinfo(found);
    return match;
}

}  // namespace

bool offers_rdma(const sockaddr* local, const std::vector<std::string>& items) noexcept {
    if (local == nullptr || (local->sa_family != AF_INET && local->sa_family != AF_INET6)) return false;
    try {
        for (const std::string& item : items)
            if (item == "*" || resolves_to(item, local)) return true;
    } catch (...) {
    }
    return false;
}

}  // namespace pg_rdma::server
