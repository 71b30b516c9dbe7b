// A backend's client session after the upgrade: the backend keeps using the
// client socket's number, and every call on it is answered by the RDMA
// connection. The TCP socket itself stays open under that number (the
// postmaster's real accept: pg_hba, inet_client_addr(), getsockopt keep
// working on it) and is otherwise idle.
//
// Waits: each epoll set that registered the client socket has that
// registration replaced by the connection's descriptor with the same epoll
// data (adopt()); epoll_ctl on the client socket is translated the same way
// from then on. The connection's descriptor only turns readable, so what
// the set being waited in asked for (EPOLLIN, EPOLLOUT, EPOLLRDHUP) becomes
// the connection's interest, and epoll_wait() rewrites that registration's
// events from the connection's true readiness, drops wakeups that are not
// (a completion or keepalive tick that made nothing ready) and waits again
// for the rest of the timeout. Before sleeping it busy-polls briefly, where
// the latency is won.
//
// Single-threaded, like a backend. Every method is noexcept: -1 and errno.
#pragma once

#include <sys/epoll.h>
#include <sys/types.h>

#include <cstddef>
#include <memory>

#include "server_ext/session/wait_registrations.hpp"
#include "transport/connection.hpp"

namespace pg_rdma::server {

class RdmaSession {
public:
    RdmaSession(int client_fd, std::unique_ptr<transport::Connection> connection) noexcept;

    // Moves every registration of the client socket onto the connection.
    // false (errno) when an epoll set refused; the session is then unusable.
    bool adopt(const WaitRegistrations& registrations) noexcept;

    [[nodiscard]] int client_fd() const noexcept { return client_fd_; }
    [[nodiscard]] transport::Connection* connection() const noexcept { return connection_.get(); }
    [[nodiscard]] bool watches(int epfd) const noexcept { return registrations_.find(epfd) != nullptr; }

    ssize_t recv(void* buf, std::size_t len, int flags) noexcept;
    // MSG_MORE: a full output buffer (output_batching.hpp).
    ssize_t send(const void* buf, std::size_t len, int flags) noexcept;
    // Sends what MSG_MORE sends hold: the backend flushed, or is about to
    // wait in a set that does not watch the client (pg_sleep, a lock).
    // True when bytes went out (the pg_stat_rdma counters moved).
    // `still_held`, when given, says whether some are still held: they wait
    // for the client's credits, and go out with them.
    bool send_held(bool* still_held = nullptr) noexcept;
    int epoll_ctl(int epfd, int op, epoll_event* event) noexcept;
    int epoll_wait(int epfd, epoll_event* events, int maxevents, int timeout_ms) noexcept;
    // The epoll set `epfd` is being closed.
    void forget_set(int epfd) noexcept;
    // close() of the client socket: Close on the connection (drained), then
    // the TCP socket. Returns what closing the connection said.
    int close() noexcept;

private:
    void refresh_interest() noexcept;

    int client_fd_;
    std::unique_ptr<transport::Connection> connection_;
    WaitRegistrations registrations_;
};

}  // namespace pg_rdma::server
