// The proxy's listening sockets. A socket file left by a proxy that died
// is taken over; one that a live process still answers on is not.
#pragma once

#include <string>
#include <vector>

#include "libclient/proxy/endpoints.hpp"

namespace pg_rdma::proxy {

// Clients waiting to be accepted, per listening socket. Sessions are set up
// at the server's pace (a TCP and an RDMA handshake each), so a crowd
// arriving at once waits here rather than being refused.
inline constexpr int kListenBacklog = 1024;
// PostgreSQL's own default for unix_socket_permissions: who may connect is
// decided by the directory's permissions and by the server's pg_hba.conf.
inline constexpr unsigned kSocketFileMode = 0777;

class Listeners {
public:
    Listeners() = default;
    ~Listeners();  // closes the sockets and removes the socket files it made
    Listeners(const Listeners&) = delete;
    Listeners& operator=(const Listeners&) = delete;

    // Opens one more; "" or what failed.
    std::string open(const ListenEndpoint& endpoint);
    // Closes all, removing the socket files (on shutdown, before the
    // sessions still open have ended).
    void close_all();

    [[nodiscard]] const std::vector<int>& fds() const { return fds_; }

private:
    std::vector<int> fds_;
    std::vector<std::string> socket_files_;
};

}  // namespace pg_rdma::proxy
