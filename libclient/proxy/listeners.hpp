// The proxy's listening sockets. A Unix socket comes with a lock file
// beside it, as PostgreSQL keeps one (DIR/.s.PGSQL.PORT.lock, the owner's
// PID on its first line): a second proxy, or a PostgreSQL server started
// later on the same directory and port, sees the socket taken and refuses,
// rather than take it over. A socket file and lock left by a proxy that
// died are taken over.
#pragma once

#include <string>
#include <vector>

#include "libclient/proxy/endpoints.hpp"

namespace pg_rdma::proxy {

// Clients waiting to be accepted, per listening socket. Sessions are set up
// at the server's pace (a TCP and an RDMA handshake each), so a crowd
// arriving at once waits here rather than being refused.
inline constexpr int kListenBacklog = 1024;

class Listeners {
public:
    Listeners() = default;
    ~Listeners();  // closes the sockets and removes the socket and lock files it made
    Listeners(const Listeners&) = delete;
    Listeners& operator=(const Listeners&) = delete;

    // Opens one more (non-blocking); a Unix socket gets `socket_mode`.
    // "" or what failed.
    std::string open(const ListenEndpoint& endpoint, unsigned socket_mode);
    // Closes all, removing the files (on shutdown, before the sessions
    // still open have ended).
    void close_all();

    [[nodiscard]] const std::vector<int>& fds() const { return fds_; }

private:
    std::string open_unix(const std::string& path, unsigned socket_mode);

    std::vector<int> fds_;
    std::vector<int> lock_fds_;
    std::vector<std::string> files_;  // socket files and lock files, removed on close
};

}  // namespace pg_rdma::proxy
