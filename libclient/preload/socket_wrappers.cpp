// The socket calls libpq makes (and an application may make on PQsocket()),
// as libpq_rdma.so exports them. A descriptor without an entry in the
// SocketTable, or a call made from inside the transport, goes to libc
// untouched; for an upgraded descriptor, data calls go to the transport's
// Connection and socket-level queries to the TCP socket kept beside it.
// POSIX contract throughout: -1 and errno. Never an exception.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

#include "libclient/preload/conn_policy.hpp"
#include "libclient/preload/epoll_registry.hpp"
#include "libclient/preload/inherited_session.hpp"
#include "libclient/preload/libc_calls.hpp"
#include "libclient/preload/pq_messages.hpp"
#include "libclient/preload/socket_table.hpp"
#include "libclient/preload/upgrade_driver.hpp"

using namespace pg_rdma::client;

namespace {

// The entry of `fd` when this call is ours to handle, else nullptr.
SocketEntry* ours(int fd) noexcept {
    if (in_transport()) return nullptr;
    return SocketTable::instance().find(fd);
}

// The same for a data call: a forked child moving bytes on a session it
// inherited takes it over first (inherited_session.hpp). Socket-level
// queries and shutdown do not: they say nothing of who will use it.
SocketEntry* ours_for_data(int fd) noexcept {
    if (in_transport()) return nullptr;
    return find_adopting(fd);
}

// The descriptor socket-level calls on `fd` should reach.
int socket_of(const SocketEntry& entry, int fd) noexcept {
    return entry.state == SocketState::Rdma ? entry.tcp_fd : fd;
}

bool is_tcp(int fd, const sockaddr* addr) noexcept {
    if (addr == nullptr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)) return false;
    int type = 0;
    socklen_t len = sizeof type;
    return libc().getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM;
}

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

// Data calls while the upgrade still owns the socket: libpq sends nothing
// then (PQconnectPoll does not run it), but an application might.
bool passes_through(const SocketEntry& entry) noexcept {
    return entry.state == SocketState::Connecting || entry.state == SocketState::Reconnecting;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int connect(int fd, const sockaddr* addr, socklen_t len) {
    const RsocketPolicy policy = ActivePolicy::current();
    if (policy == RsocketPolicy::Require && !in_transport() && addr != nullptr && addr->sa_family == AF_UNIX) {
        // RDMA needs an IP address: a Unix-domain socket can never be
        // upgraded, and require must not quietly go without it.
        ActivePolicy::refuse("with_rsocket=require: RDMA is not possible over a Unix-domain socket; "
                             "give a TCP host (host=<address>) for RDMA");
        errno = EPROTONOSUPPORT;
        return -1;
    }
    if (policy == RsocketPolicy::Off || in_transport() || !is_tcp(fd, addr)) return libc().connect(fd, addr, len);
    const int rc = libc().connect(fd, addr, len);
    if (rc == 0 || errno == EINPROGRESS || errno == EINTR) {
        const int saved = errno;
        try {
            if (!arm(fd, addr, len, policy) && policy == RsocketPolicy::Require) {
                errno = EMFILE;  // descriptor number beyond the table
                return -1;
            }
        } catch (...) {
            if (policy == RsocketPolicy::Require) {
                errno = ENOMEM;
                return -1;
            }
        }
        errno = saved;
    }
    return rc;
}

__attribute__((visibility("default"))) int close(int fd) {
    if (in_transport()) return libc().close(fd);
    if (!EpollRegistry::instance().empty()) EpollRegistry::instance().forget_descriptor(fd);
    if (!SocketTable::instance().any()) return libc().close(fd);
    std::unique_ptr<SocketEntry> entry = SocketTable::instance().take(fd);
    if (!entry) return libc().close(fd);
    int rc = 0;
    int error = 0;
    {
        TransportCall inside;
        entry->upgrade.reset();
        // A forked child's copy of the parent's session is only let go of.
        if (entry->connection && entry->connection->made_in_this_process() && entry->connection->close() < 0) {
            rc = -1;
            error = errno;
        }
        entry->connection.reset();
    }
    if (entry->tcp_fd >= 0) libc().close(entry->tcp_fd);
    if (libc().close(fd) < 0 && rc == 0) {
        rc = -1;
        error = errno;
    }
    if (rc < 0) errno = error;
    return rc;
}

__attribute__((visibility("default"))) ssize_t recv(int fd, void* buf, size_t len, int flags) {
    SocketEntry* e = ours_for_data(fd);
    if (e == nullptr || passes_through(*e)) return libc().recv(fd, buf, len, flags);
    if ((flags & ~(MSG_DONTWAIT | MSG_NOSIGNAL)) != 0) {
        errno = EOPNOTSUPP;  // MSG_PEEK, MSG_WAITALL...: not on an RDMA session
        return -1;
    }
    return conn_read(*e, buf, len);
}

__attribute__((visibility("default"))) ssize_t send(int fd, const void* buf, size_t len, int flags) {
    SocketEntry* e = ours_for_data(fd);
    if (e == nullptr || passes_through(*e)) return libc().send(fd, buf, len, flags);
    if ((flags & ~(MSG_DONTWAIT | MSG_NOSIGNAL | MSG_MORE)) != 0) {
        errno = EOPNOTSUPP;
        return -1;
    }
    return conn_write(*e, buf, len);
}

__attribute__((visibility("default"))) ssize_t read(int fd, void* buf, size_t len) {
    SocketEntry* e = ours_for_data(fd);
    if (e == nullptr || passes_through(*e)) return libc().read(fd, buf, len);
    return conn_read(*e, buf, len);
}

__attribute__((visibility("default"))) ssize_t write(int fd, const void* buf, size_t len) {
    SocketEntry* e = ours_for_data(fd);
    if (e == nullptr || passes_through(*e)) return libc().write(fd, buf, len);
    return conn_write(*e, buf, len);
}

__attribute__((visibility("default"))) ssize_t readv(int fd, const iovec* iov, int iovcnt) {
    SocketEntry* e = ours_for_data(fd);
    if (e == nullptr || passes_through(*e)) return libc().readv(fd, iov, iovcnt);
    if (iovcnt <= 0 || iov == nullptr) return conn_read(*e, nullptr, 0);
    return conn_read(*e, iov[0].iov_base, iov[0].iov_len);  // a short read is allowed
}

__attribute__((visibility("default"))) ssize_t writev(int fd, const iovec* iov, int iovcnt) {
    SocketEntry* e = ours_for_data(fd);
    if (e == nullptr || passes_through(*e)) return libc().writev(fd, iov, iovcnt);
    if (e->state != SocketState::Rdma) return failed_io(*e);
    if (forked_away(*e)) return forked_io();
    TransportCall inside;
    return after_io(*e, e->connection->writev(iov, iovcnt));
}

__attribute__((visibility("default"))) int shutdown(int fd, int how) {
    SocketEntry* e = ours(fd);
    if (e == nullptr || e->state != SocketState::Rdma) return libc().shutdown(fd, how);
    TransportCall inside;
    return e->connection->shutdown(how);
}

__attribute__((visibility("default"))) int getsockopt(int fd, int level, int name, void* value, socklen_t* len) {
    SocketEntry* e = ours(fd);
    if (e == nullptr) return libc().getsockopt(fd, level, name, value, len);
    if (level == SOL_SOCKET && name == SO_ERROR && value != nullptr && len != nullptr && *len >= sizeof(int)) {
        if (e->state == SocketState::Failed) {
            *static_cast<int*>(value) = e->failed_errno;
            *len = sizeof(int);
            return 0;
        }
        if (e->state == SocketState::Rdma) {
            TransportCall inside;
            *static_cast<int*>(value) = e->connection->failed() ? ECONNRESET : 0;
            *len = sizeof(int);
            return 0;
        }
    }
    return libc().getsockopt(socket_of(*e, fd), level, name, value, len);
}

__attribute__((visibility("default"))) int setsockopt(int fd, int level, int name, const void* value,
                                                      socklen_t len) {
    SocketEntry* e = ours(fd);
    return libc().setsockopt(e == nullptr ? fd : socket_of(*e, fd), level, name, value, len);
}

__attribute__((visibility("default"))) int getsockname(int fd, sockaddr* addr, socklen_t* len) {
    SocketEntry* e = ours(fd);
    return libc().getsockname(e == nullptr ? fd : socket_of(*e, fd), addr, len);
}

__attribute__((visibility("default"))) int getpeername(int fd, sockaddr* addr, socklen_t* len) {
    SocketEntry* e = ours(fd);
    return libc().getpeername(e == nullptr ? fd : socket_of(*e, fd), addr, len);
}

}  // extern "C"
