// Dispatch only: what to do with the client socket is backend_session's
// and rdma_session's business. Each hook keeps the cost for descriptors that
// are not the client socket to a compare or two: close() runs for every
// file the postmaster and its children close.
#include "server_ext/session/socket_hooks.hpp"

#include <cerrno>

#include "server_ext/session/backend_session.hpp"
#include "server_ext/session/output_batching.hpp"
#include "server_ext/session/real_calls.hpp"

#include "server_ext/pg_headers.hpp"
#include "server_ext/pg_compat.hpp"

namespace pg_rdma::server {
namespace {

// The backend's client socket, before the session is decided.
bool is_undecided_client_socket(const BackendSession& s, int fd) {
    return s.phase == SessionPhase::Undecided && IsUnderPostmaster && fd >= 0 && compat::client_socket() == fd;
}

ssize_t after_rdma_io(ssize_t n) {
    const int saved = errno;
    if (n > 0) publish_counters();
    // EIO: a call nested in another (quickdie's send from a signal handler)
    // was refused; the connection itself is fine, and logging here would
    // allocate inside a signal handler.
    else if (n < 0 && saved != EAGAIN && saved != EWOULDBLOCK && saved != EINTR && saved != EIO) log_rdma_failure();
    errno = saved;
    return n;
}

ssize_t after_tcp_io(ssize_t n, std::uint64_t& total) {
    if (n > 0) {
        const int saved = errno;
        total += static_cast<std::uint64_t>(n);
        publish_counters();
        errno = saved;
    }
    return n;
}

}  // namespace

ssize_t hook_recv(int fd, void* buf, std::size_t len, int flags) noexcept {
    BackendSession& s = backend_session();
    if (is_undecided_client_socket(s, fd) && !start_session(fd)) return errno = EAGAIN, -1;
    if (fd != s.client_fd || fd < 0) return real_calls().recv(fd, buf, len, flags);
    // Not a session: PostgreSQL sees the stream end before a startup
    // packet and ends the backend without a word.
    if (s.phase == SessionPhase::Probed) return 0;
    if (s.phase == SessionPhase::Rdma) return after_rdma_io(s.rdma->recv(buf, len, flags));
    const ssize_t n = real_calls().recv(fd, buf, len, flags);
    return s.tracked ? after_tcp_io(n, s.bytes_received) : n;
}

ssize_t hook_send(int fd, const void* buf, std::size_t len, int flags) noexcept {
    BackendSession& s = backend_session();
    if (fd != s.client_fd || fd < 0) return real_calls().send(fd, buf, len, flags);
    if (s.phase == SessionPhase::Probed) return errno = EPIPE, -1;
    if (s.phase == SessionPhase::Rdma)
        return after_rdma_io(s.rdma->send(buf, len, output_buffer_full() ? flags | MSG_MORE : flags));
    const ssize_t n = real_calls().send(fd, buf, len, flags);
    return s.tracked ? after_tcp_io(n, s.bytes_sent) : n;
}

int hook_epoll_ctl(int epfd, int op, int fd, epoll_event* event) noexcept {
    BackendSession& s = backend_session();
    if (s.phase == SessionPhase::Rdma && fd == s.client_fd) return s.rdma->epoll_ctl(epfd, op, event);
    const int rc = real_calls().epoll_ctl(epfd, op, fd, event);
    if (rc == 0 && is_undecided_client_socket(s, fd)) {
        try {
            s.pending.apply(epfd, op, event);
        } catch (...) {
            return errno = ENOMEM, -1;
        }
    }
    return rc;
}

int hook_epoll_wait(int epfd, epoll_event* events, int maxevents, int timeout_ms) noexcept {
    BackendSession& s = backend_session();
    if (s.phase == SessionPhase::Rdma) {
        if (s.rdma->watches(epfd)) {
            const int n = s.rdma->epoll_wait(epfd, events, maxevents, timeout_ms);
            // An idle session can fail over inside its wait: its row says so
            // now, not at the next query.
            if (!s.row.failed_over && s.rdma->connection() != nullptr &&
                s.rdma->connection()->stats().failed_over) {
                const int saved = errno;
                publish_counters();
                errno = saved;
            }
            return n;
        }
        // A wait elsewhere: nothing stays held through it.
        if (timeout_ms != 0 && s.rdma->send_held()) publish_counters();
    }
    return real_calls().epoll_wait(epfd, events, maxevents, timeout_ms);
}

int hook_close(int fd) noexcept {
    BackendSession& s = backend_session();
    if (s.phase == SessionPhase::Rdma) {
        if (fd == s.client_fd) {
            // The session ends: Close on RDMA, drained, then the TCP socket.
            const int rc = s.rdma->close();
            const int saved = errno;
            s.phase = SessionPhase::Tcp;
            s.client_fd = -1;
            errno = saved;
            return rc;
        }
        s.rdma->forget_set(fd);
    } else if (s.phase == SessionPhase::Undecided && !s.pending.all().empty()) {
        s.pending.forget_set(fd);
    }
    return real_calls().close(fd);
}

}  // namespace pg_rdma::server
