#include "libclient/preload/socket_io.hpp"

#include <poll.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

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

}  // namespace

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
    return entry.state == SocketState::Connecting || entry.state == SocketState::Reconnecting;
}

ssize_t conn_read(SocketEntry& entry, void* buf, size_t len) noexcept {
    if (entry.state != SocketState::Rdma) return failed_io(entry);
    if (forked_away(entry)) return forked_io();
    TransportCall inside;
    return after_io(entry, entry.connection->read(buf, len));
}

ssize_t conn_write(SocketEntry& entry, const void* buf, size_t len) noexcept {
    if (entry.state != SocketState::Rdma) return failed_io(entry);
    if (forked_away(entry)) return forked_io();
    TransportCall inside;
    return after_io(entry, entry.connection->write(buf, len));
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

ssize_t conn_writev(SocketEntry& entry, const iovec* iov, int iovcnt) noexcept {
    if (entry.state != SocketState::Rdma) return failed_io(entry);
    if (forked_away(entry)) return forked_io();
    TransportCall inside;
    return after_io(entry, entry.connection->writev(iov, iovcnt));
}

}  // namespace pg_rdma::client
