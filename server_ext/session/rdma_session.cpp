#include "server_ext/session/rdma_session.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "server_ext/session/real_calls.hpp"

namespace pg_rdma::server {
namespace {

using Clock = std::chrono::steady_clock;

// What the connection's descriptor is registered for in every set: it only
// ever turns readable (transport/connection.hpp, fd()).
epoll_event descriptor_event(std::uint64_t data) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = data;
    return ev;
}

// Flags a backend may pass that mean nothing to a connection which never
// blocks and raises no SIGPIPE.
constexpr int kHarmlessFlags = MSG_DONTWAIT | MSG_NOSIGNAL;

}  // namespace

RdmaSession::RdmaSession(int client_fd, std::unique_ptr<transport::Connection> connection) noexcept
    : client_fd_(client_fd), connection_(std::move(connection)) {}

bool RdmaSession::adopt(const WaitRegistrations& registrations) noexcept {
    const RealCalls& real = real_calls();
    try {
        for (const WaitRegistration& reg : registrations.all()) {
            // The number still names the TCP socket: its registration goes,
            // the connection's descriptor takes its place with the same data.
            (void)real.epoll_ctl(reg.epfd, EPOLL_CTL_DEL, client_fd_, nullptr);
            epoll_event ev = descriptor_event(reg.data);
            if (real.epoll_ctl(reg.epfd, EPOLL_CTL_ADD, connection_->fd(), &ev) != 0) return false;
            epoll_event asked{};
            asked.events = reg.events;
            asked.data.u64 = reg.data;
            registrations_.apply(reg.epfd, EPOLL_CTL_ADD, &asked);
        }
    } catch (...) {
        errno = ENOMEM;
        return false;
    }
    refresh_interest();
    return true;
}

ssize_t RdmaSession::recv(void* buf, std::size_t len, int flags) noexcept {
    if (!connection_) return errno = EBADF, -1;
    if ((flags & ~kHarmlessFlags) != 0) return errno = EOPNOTSUPP, -1;
    return connection_->read(buf, len);
}

ssize_t RdmaSession::send(const void* buf, std::size_t len, int flags) noexcept {
    if (!connection_) return errno = EBADF, -1;
    if ((flags & ~(kHarmlessFlags | MSG_MORE)) != 0) return errno = EOPNOTSUPP, -1;
    return connection_->send(buf, len, flags & MSG_MORE);
}

bool RdmaSession::send_held(bool* still_held) noexcept {
    if (still_held != nullptr) *still_held = false;
    if (!connection_) return false;
    const std::uint64_t before = connection_->stats().bytes_sent;
    // A failure shows in the next read or write, which logs it.
    const int rc = connection_->flush();
    if (rc != 0 && errno == EAGAIN && still_held != nullptr) *still_held = true;
    return connection_->stats().bytes_sent != before;
}

int RdmaSession::epoll_ctl(int epfd, int op, epoll_event* event) noexcept {
    const RealCalls& real = real_calls();
    if (!connection_) return errno = EBADF, -1;
    if (op != EPOLL_CTL_DEL && event == nullptr) return errno = EFAULT, -1;
    int rc = 0;
    if (op == EPOLL_CTL_DEL) {
        rc = real.epoll_ctl(epfd, EPOLL_CTL_DEL, connection_->fd(), nullptr);
    } else {
        epoll_event ev = descriptor_event(event->data.u64);
        rc = real.epoll_ctl(epfd, op, connection_->fd(), &ev);
    }
    if (rc != 0) return rc;
    try {
        registrations_.apply(epfd, op, event);
    } catch (...) {
        return errno = ENOMEM, -1;
    }
    refresh_interest();
    return 0;
}

int RdmaSession::epoll_wait(int epfd, epoll_event* events, int maxevents, int timeout_ms) noexcept {
    const RealCalls& real = real_calls();
    const WaitRegistration* reg = registrations_.find(epfd);
    if (reg == nullptr || maxevents <= 0 || !connection_) return real.epoll_wait(epfd, events, maxevents, timeout_ms);
    const std::uint64_t data = reg->data;
    const short wanted = poll_events_for(reg->events);
    const auto start = Clock::now();
    // The busy-poll comes first: input that is there or arrives within it
    // (the client's next query) skips the connection's own epoll_wait and
    // completion queue re-arm, and since the connection arms that queue
    // only where a sleep may follow, it raises no completion event either
    // (transport/stream_datapath.cpp, update_readiness). A disconnect or a
    // keepalive tick, which only poll_events() takes in, wakes the sleep
    // below, and is taken in after it.
    short ready = timeout_ms != 0 ? connection_->spin(wanted) : 0;
    // Only one set is waited in at a time: the descriptor signals what THIS
    // set asks for. With the union of every set's events it would stay
    // readable for another set's interest (FeBeWaitSet still asking for
    // EPOLLOUT while the TLS handshake's set waits to read), and each
    // wakeup here would find nothing: a busy loop.
    if (ready == 0) (void)connection_->set_interest(wanted);
    // Before a sleep the connection is not asked again: set_interest() armed
    // its completion queue if nothing is signalled, and whatever its
    // sources hold (an event, a tick) keeps our registration readable, so
    // the sleep returns at once for it. A call that cannot sleep asks.
    if (ready == 0 && timeout_ms == 0) ready = connection_->poll_events(wanted);
    for (;;) {
        int wait_ms = 0;
        if (ready == 0 && timeout_ms != 0) {
            if (timeout_ms < 0) {
                wait_ms = -1;
            } else {
                const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
                wait_ms = static_cast<int>(std::max<std::int64_t>(timeout_ms - waited.count(), 0));
            }
        }
        int n = real.epoll_wait(epfd, events, maxevents, wait_ms);
        if (n < 0) return n;
        // The kernel's word on our registration only means "look": drop it
        // and answer from the connection's readiness instead.
        const bool woke_for_us =
            std::any_of(events, events + n, [&](const epoll_event& e) { return e.data.u64 == data; });
        n = static_cast<int>(std::remove_if(events, events + n, [&](const epoll_event& e) { return e.data.u64 == data; }) -
                             events);
        if (woke_for_us && ready == 0) ready = connection_->poll_events(wanted);
        if (ready != 0 && n < maxevents) {
            events[n].events = epoll_events_for(ready);
            events[n].data.u64 = data;
            ++n;
        }
        if (n > 0 || wait_ms == 0) return n;
        // Only our registration woke, for nothing the caller asked (a
        // completion, a keepalive tick): wait again for the time left.
    }
}

void RdmaSession::forget_set(int epfd) noexcept {
    registrations_.forget_set(epfd);
    refresh_interest();
}

int RdmaSession::close() noexcept {
    if (!connection_) return errno = EBADF, -1;
    const int rc = connection_->close();
    const int saved = errno;
    connection_.reset();
    if (real_calls().close != nullptr) real_calls().close(client_fd_);
    errno = saved;
    return rc;
}

void RdmaSession::refresh_interest() noexcept {
    if (connection_) (void)connection_->set_interest(registrations_.poll_interest());
}

}  // namespace pg_rdma::server
