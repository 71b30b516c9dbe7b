#include "libclient/preload/socket_io.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/time.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string>
#include <string_view>

#include "libclient/preload/driver_policy.hpp"
#include "libclient/preload/epoll_registry.hpp"
#include "libclient/preload/first_write.hpp"
#include "libclient/preload/inherited_session.hpp"
#include "libclient/preload/libc_calls.hpp"
#include "libclient/preload/pq_messages.hpp"

namespace pg_rdma::client {
namespace {

ssize_t failed_io(const SocketEntry& entry) noexcept {
    errno = entry.state == SocketState::Failed ? entry.failed_errno : EAGAIN;
    return -1;
}

ssize_t forked_io() noexcept {
    errno = EBADF;
    return -1;
}

// What a read or write that did not move bytes means to the program. Once
// the connection has failed for good every error is ECONNRESET: libpq ends a
// session only for that one (any other errno from a read leaves it open, and
// psql in COPY would retry for ever), and the reason, naming RDMA, goes to
// stderr once. A failover onto TCP is said once too.
ssize_t after_io(SocketEntry& entry, ssize_t n) noexcept {
    const int e = errno;
    if (n >= 0) return n;
    if (!entry.told_failover && entry.connection->stats().failed_over) {
        entry.told_failover = true;
        warn_session_event("RDMA failed (", entry.connection->failover_reason(),
                           "); the session goes on over its TCP connection");
    }
    // On TCP since then: its errors are TCP's own, and libpq knows them.
    if (entry.told_failover) return errno = e, -1;
    if (e == EAGAIN || e == EWOULDBLOCK || e == EINTR || e == EBADF ||
        (entry.connection->poll_events(0) & POLLERR) == 0)
        return errno = e, -1;
    if (!entry.told_failure) {
        entry.told_failure = true;
        const std::string why = entry.connection->failure_reason();
        // Views, not a std::string built here: nothing in this noexcept path may throw.
        warn_session_event("the RDMA session failed: ", why.empty() ? std::string_view(std::strerror(e)) : std::string_view(why),
                           "");
    }
    errno = ECONNRESET;
    return -1;
}

bool waits(const SocketEntry& entry, int flags) noexcept { return entry.blocking && (flags & MSG_DONTWAIT) == 0; }

// SO_RCVTIMEO or SO_SNDTIMEO as the program set it (on the TCP socket kept
// beside the session, where setsockopt goes): milliseconds, -1 for none.
int socket_timeout_ms(const SocketEntry& entry, short events) noexcept {
    timeval tv{};
    socklen_t len = sizeof tv;
    const int name = (events & POLLIN) != 0 ? SO_RCVTIMEO : SO_SNDTIMEO;
    if (entry.tcp_fd < 0 || libc().getsockopt(entry.tcp_fd, SOL_SOCKET, name, &tv, &len) < 0) return -1;
    if (tv.tv_sec == 0 && tv.tv_usec == 0) return -1;
    const long long ms = static_cast<long long>(tv.tv_sec) * 1000 + (tv.tv_usec + 999) / 1000;
    return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

// One read or write on the session, waiting for `events` between tries when
// the program's socket was blocking, for as long as its SO_RCVTIMEO or
// SO_SNDTIMEO allows (then EAGAIN, as the socket says). A signal ends the
// wait with EINTR, as it ends a blocking socket call without SA_RESTART.
template <typename Io>
ssize_t moving(SocketEntry& entry, int flags, short events, Io&& io) noexcept {
    TransportCall inside;
    int timeout = -2;  // not read yet
    for (;;) {
        const ssize_t n = io();
        if (n >= 0 || errno != EAGAIN || !waits(entry, flags)) return after_io(entry, n);
        if (timeout == -2) timeout = socket_timeout_ms(entry, events);
        const int ev = entry.connection->wait(events, timeout);
        if (ev < 0) return -1;
        if (ev == 0) return errno = EAGAIN, -1;
    }
}

DataRoute answer(ssize_t n, int code = 0) noexcept {
    DataRoute route;
    route.answered = true;
    route.answer = n;
    if (n < 0) errno = code;
    return route;
}

std::size_t total_of(const iovec* iov, int iovcnt) noexcept {
    std::size_t total = 0;
    for (int i = 0; iov != nullptr && i < iovcnt; ++i) total += iov[i].iov_len;
    return total;
}

}  // namespace

DataRoute route_read(int fd, int flags) noexcept {
    if (in_transport()) return {};
    if (any_candidates()) first_read(fd);
    EntryRef e = find_adopting(fd);
    if (e == nullptr || passes_through(*e)) return {};
    if (e->by_first_write && e->state == SocketState::Upgrading) {
        const int f = libc().fcntl(fd, F_GETFL);
        const bool blocking = (flags & MSG_DONTWAIT) == 0 && f >= 0 && (f & O_NONBLOCK) == 0;
        switch (advance_first_write(fd, *e, blocking)) {
            case FirstWriteState::Upgrading: return answer(-1, EAGAIN);
            case FirstWriteState::Session: break;
            case FirstWriteState::Plain: return {};
            case FirstWriteState::Failed: return answer(-1, e->failed_errno);
        }
    }
    DataRoute route;
    route.entry = std::move(e);
    return route;
}

DataRoute route_write(int fd, const iovec* iov, int iovcnt, int flags) noexcept {
    if (in_transport()) return {};
    if (any_candidates() && is_candidate(fd))
        if (const auto n = first_write(fd, iov, iovcnt, flags)) return answer(*n, errno);
    EntryRef e = find_adopting(fd);
    if (e == nullptr || passes_through(*e)) return {};
    if (e->by_first_write && e->state == SocketState::Upgrading) {
        // Kept with the first bytes: they all leave together once it ends.
        const std::size_t total = total_of(iov, iovcnt);
        std::size_t kept_already = 0;
        {
            const std::lock_guard lock(e->first_write_lock);
            kept_already = e->pending.size();
        }
        if (kept_already + total > kMaxPendingBytes) {
            switch (advance_first_write(fd, *e, false)) {
                case FirstWriteState::Upgrading: return answer(-1, EAGAIN);
                case FirstWriteState::Session: break;
                case FirstWriteState::Plain: return {};
                case FirstWriteState::Failed: return answer(-1, e->failed_errno);
            }
        } else {
            for (int i = 0; i < iovcnt; ++i)
                if (iov[i].iov_base == nullptr && iov[i].iov_len > 0) return answer(-1, EFAULT);
            bool kept = false;
            try {
                const std::lock_guard lock(e->first_write_lock);
                if (e->state == SocketState::Upgrading) {
                    for (int i = 0; i < iovcnt; ++i)
                        e->pending.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
                    kept = true;
                }
            } catch (...) {
                return answer(-1, ENOMEM);
            }
            if (kept) {
                if (advance_first_write(fd, *e, false) == FirstWriteState::Failed) return answer(-1, e->failed_errno);
                return answer(static_cast<ssize_t>(total));
            }
            // Another thread ended the upgrade meanwhile: go where it went.
        }
        if (e->state == SocketState::Failed) return answer(-1, e->failed_errno);
        if (e->state != SocketState::Rdma) return {};
    }
    DataRoute route;
    route.entry = std::move(e);
    return route;
}

EntryRef ours(int fd) noexcept {
    if (in_transport()) return {};
    return SocketTable::instance().find(fd);
}

EntryRef ours_for_data(int fd) noexcept {
    if (in_transport()) return {};
    return find_adopting(fd);
}

int socket_of(const SocketEntry& entry, int fd) noexcept {
    return entry.state == SocketState::Rdma ? entry.tcp_fd : fd;
}

bool passes_through(const SocketEntry& entry) noexcept {
    return entry.state == SocketState::Connecting || entry.state == SocketState::Reconnecting ||
           entry.state == SocketState::Plain;
}

ssize_t conn_read(SocketEntry& entry, void* buf, size_t len, int flags) noexcept {
    if (entry.state != SocketState::Rdma) return failed_io(entry);
    if (forked_away(entry)) return forked_io();
    return moving(entry, flags, POLLIN, [&] { return entry.connection->read(buf, len); });
}

ssize_t conn_write(SocketEntry& entry, const void* buf, size_t len, int flags) noexcept {
    if (entry.state != SocketState::Rdma) return failed_io(entry);
    if (forked_away(entry)) return forked_io();
    return moving(entry, flags, POLLOUT, [&] { return entry.connection->write(buf, len); });
}

int close_number(int fd, KernelClose how) noexcept {
    const auto kernel_close = [how](int number) {
        return how == KernelClose::Libc ? libc().close(number)
                                        : static_cast<int>(libc_syscall()(SYS_close, number));
    };
    if ((EpollRegistry::instance().empty() && !SocketTable::instance().any() && !any_candidates()) ||
        !SocketTable::owned_here())
        return kernel_close(fd);
    // Before the number is free for another connect() to mark.
    (void)take_candidate(fd);
    if (!EpollRegistry::instance().empty()) EpollRegistry::instance().forget_descriptor(fd);
    if (!SocketTable::instance().any()) return kernel_close(fd);
    // The number is a duplicate of the transport's own descriptor, so it is
    // closed now whatever else holds the session; the session ends with its
    // last number, when no call is inside it any more (at once, unless
    // another thread, or the one this signal handler interrupted, is).
    const SocketTable::Removal removal = SocketTable::instance().remove(fd, end_session);
    const int rc = kernel_close(fd);
    if (rc < 0 || !removal.now || removal.error == 0) return rc;
    errno = removal.error;
    return -1;
}

int end_session(SocketEntry& entry) noexcept {
    int error = 0;
    {
        TransportCall inside;
        entry.upgrade.reset();
        if (entry.connection && entry.connection->made_in_this_process() && entry.connection->close() < 0)
            error = errno;
        entry.connection.reset();
    }
    if (entry.tcp_fd >= 0) libc().close(entry.tcp_fd);
    entry.tcp_fd = -1;
    return error;
}

ssize_t conn_writev(SocketEntry& entry, const iovec* iov, int iovcnt, int flags) noexcept {
    if (entry.state != SocketState::Rdma) return failed_io(entry);
    if (forked_away(entry)) return forked_io();
    return moving(entry, flags, POLLOUT, [&] { return entry.connection->writev(iov, iovcnt); });
}

}  // namespace pg_rdma::client
