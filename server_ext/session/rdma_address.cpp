#include "server_ext/session/rdma_address.hpp"

#include <netdb.h>
#include <netinet/in.h>

#include <cstring>
#include <string>
#include <vector>

#include "server_ext/listen_list.hpp"

namespace pg_rdma::server {
namespace {

struct Remembered {
    bool every = false;                    // "*"
    std::vector<sockaddr_storage> addresses;
};

Remembered& remembered() {
    static Remembered r;
    return r;
}

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

void resolve_into(const std::string& item, std::vector<sockaddr_storage>& out) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(item.c_str(), nullptr, &hints, &found) != 0) return;
    for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
        if (ai->ai_addrlen > sizeof(sockaddr_storage)) continue;
        sockaddr_storage a{};
        std::memcpy(&a, ai->ai_addr, ai->ai_addrlen);
        out.push_back(a);
    }
    freeaddrinfo(found);
}

}  // namespace

void remember_rdma_addresses(const char* list) noexcept {
    Remembered& r = remembered();
    try {
        for (const std::string& item : parse_address_list(list).items) {
            if (item == "*") r.every = true;
            else resolve_into(item, r.addresses);
        }
    } catch (...) {
        // Out of memory in the postmaster's startup: what was resolved stays.
    }
}

bool offers_rdma(const sockaddr* local) noexcept {
    if (local == nullptr || (local->sa_family != AF_INET && local->sa_family != AF_INET6)) return false;
    const Remembered& r = remembered();
    if (r.every) return true;
    for (const sockaddr_storage& a : r.addresses)
        if (same_ip(reinterpret_cast<const sockaddr*>(&a), local)) return true;
    return false;
}

}  // namespace pg_rdma::server
