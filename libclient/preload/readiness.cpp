#include "libclient/preload/readiness.hpp"

#include "libclient/preload/inherited_session.hpp"
#include "libclient/preload/libc_calls.hpp"

namespace pg_rdma::client {
namespace {

constexpr short kAlways = POLLERR | POLLHUP | POLLNVAL;

// `look_inside`: poll_events() (after a wakeup the connection caused),
// otherwise events_now() (no system call; see readiness.hpp).
short connection_events(SocketEntry& entry, short wanted, bool look_inside) noexcept {
    if (forked_away(entry)) return POLLNVAL;
    TransportCall inside;
    const short ev = look_inside ? entry.connection->poll_events(wanted) : entry.connection->events_now(wanted);
    return static_cast<short>(ev & (wanted | kAlways | POLLRDHUP));
}

// What a caller waiting for PQconnectPoll's next step is told.
short as_progress(short wanted) noexcept {
    return static_cast<short>((wanted & (POLLIN | POLLOUT)) != 0 ? (wanted & (POLLIN | POLLOUT)) : POLLIN);
}

}  // namespace

int upgrade_wait_limit(const SocketEntry& entry) noexcept {
    if (entry.state != SocketState::Upgrading || !entry.upgrade) return -1;
    const transport::Deadline deadline = entry.upgrade->deadline();
    if (deadline == transport::Deadline::max()) return -1;
    return transport::ms_until(deadline);
}

bool upgrade_due(const SocketEntry& entry) noexcept {
    return entry.state == SocketState::Upgrading && entry.upgrade && transport::passed(entry.upgrade->deadline());
}

short ready_now(SocketEntry& entry, short wanted) noexcept {
    switch (entry.state) {
        case SocketState::Rdma: return connection_events(entry, wanted, false);
        case SocketState::Upgrading: return upgrade_due(entry) ? as_progress(wanted) : 0;
        case SocketState::Failed: return POLLERR;
        default: return 0;
    }
}

pollfd substitute(SocketEntry& entry, int fd, short wanted) noexcept {
    switch (entry.state) {
        case SocketState::Rdma: {
            TransportCall inside;
            entry.connection->set_interest(wanted);
            return {entry.connection->fd(), POLLIN, 0};
        }
        case SocketState::Upgrading: {
            TransportCall inside;
            const transport::Want want = entry.upgrade->want();
            if (want.count > 0) return {want.fds[0].fd, want.fds[0].events, 0};
            return {-1, 0, 0};
        }
        default: return {fd, wanted, 0};
    }
}

short translate(SocketEntry& entry, short wanted, short real_revents) noexcept {
    switch (entry.state) {
        case SocketState::Rdma: return real_revents != 0 ? connection_events(entry, wanted, true) : 0;
        case SocketState::Upgrading:
            // The caller (libpq, or an application driving PQconnectPoll)
            // waits for what PQconnectPoll asked; the step tells the rest.
            if (real_revents == 0 && !upgrade_due(entry)) return 0;
            return as_progress(wanted);
        case SocketState::Failed: return POLLERR;
        default: return real_revents;
    }
}

}  // namespace pg_rdma::client
