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
#include "libclient/preload/driver_policy.hpp"
#include "libclient/preload/epoll_registry.hpp"
#include "libclient/preload/inherited_session.hpp"
#include "libclient/preload/libc_calls.hpp"
#include "libclient/preload/pq_messages.hpp"
#include "libclient/preload/socket_io.hpp"
#include "libclient/preload/socket_table.hpp"
#include "libclient/preload/upgrade_driver.hpp"

using namespace pg_rdma::client;

namespace {

bool is_tcp(int fd, const sockaddr* addr) noexcept {
    if (addr == nullptr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)) return false;
    int type = 0;
    socklen_t len = sizeof type;
    return libc().getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int connect(int fd, const sockaddr* addr, socklen_t len) {
    RsocketPolicy policy = ActivePolicy::current();
    // A libpq attempt whose conninfo and service say nothing: the servers
    // file's rule for this address comes before WITH_RSOCKET.
    if (ActivePolicy::servers_file_decides() && !in_transport())
        if (const auto rule = servers_file_policy(addr, len)) policy = *rule;
    if (policy == RsocketPolicy::Require && !in_transport() && addr != nullptr && addr->sa_family == AF_UNIX) {
        // RDMA needs an IP address: a Unix-domain socket can never be
        // upgraded, and require must not quietly go without it.
        ActivePolicy::refuse("with_rsocket=require: RDMA is not possible over a Unix-domain socket; "
                             "give a TCP host (host=<address>) for RDMA");
        errno = EPROTONOSUPPORT;
        return -1;
    }
    if (policy == RsocketPolicy::Off) {
        // Outside libpq's attempts: a driver's connection, perhaps, judged
        // at its first write (first_write.hpp). Marked without a system
        // call: PQcancel connects in signal handlers.
        const int rc = libc().connect(fd, addr, len);
        if ((rc == 0 || errno == EINPROGRESS || errno == EINTR) && driver_path_enabled() && !in_transport() &&
            !ActivePolicy::inside() && addr != nullptr && (addr->sa_family == AF_INET || addr->sa_family == AF_INET6)) {
            const int saved = errno;
            mark_candidate(fd);
            errno = saved;
        }
        return rc;
    }
    if (in_transport() || !is_tcp(fd, addr)) return libc().connect(fd, addr, len);
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

// in_transport() is not asked: the transport's own closes are of its own
// descriptors, which have no entry, and a signal handler that interrupted
// a transport call is the program's, its close() one to honour.
__attribute__((visibility("default"))) int close(int fd) { return close_number(fd, KernelClose::Libc); }

__attribute__((visibility("default"))) ssize_t recv(int fd, void* buf, size_t len, int flags) {
    DataRoute r = route_read(fd, flags);
    if (r.answered) return r.answer;
    if (r.entry == nullptr) return libc().recv(fd, buf, len, flags);
    if ((flags & ~(MSG_DONTWAIT | MSG_NOSIGNAL)) != 0) {
        errno = EOPNOTSUPP;  // MSG_PEEK, MSG_WAITALL...: not on an RDMA session
        return -1;
    }
    return conn_read(*r.entry, buf, len, flags);
}

__attribute__((visibility("default"))) ssize_t send(int fd, const void* buf, size_t len, int flags) {
    const iovec one{const_cast<void*>(buf), len};
    DataRoute r = route_write(fd, &one, 1, flags);
    if (r.answered) return r.answer;
    if (r.entry == nullptr) return libc().send(fd, buf, len, flags);
    if ((flags & ~(MSG_DONTWAIT | MSG_NOSIGNAL | MSG_MORE)) != 0) {
        errno = EOPNOTSUPP;
        return -1;
    }
    return conn_write(*r.entry, buf, len, flags);
}

__attribute__((visibility("default"))) ssize_t read(int fd, void* buf, size_t len) {
    DataRoute r = route_read(fd, 0);
    if (r.answered) return r.answer;
    if (r.entry == nullptr) return libc().read(fd, buf, len);
    return conn_read(*r.entry, buf, len);
}

__attribute__((visibility("default"))) ssize_t write(int fd, const void* buf, size_t len) {
    const iovec one{const_cast<void*>(buf), len};
    DataRoute r = route_write(fd, &one, 1, 0);
    if (r.answered) return r.answer;
    if (r.entry == nullptr) return libc().write(fd, buf, len);
    return conn_write(*r.entry, buf, len);
}

__attribute__((visibility("default"))) ssize_t readv(int fd, const iovec* iov, int iovcnt) {
    DataRoute r = route_read(fd, 0);
    if (r.answered) return r.answer;
    if (r.entry == nullptr) return libc().readv(fd, iov, iovcnt);
    if (iovcnt <= 0 || iov == nullptr) return conn_read(*r.entry, nullptr, 0);
    return conn_read(*r.entry, iov[0].iov_base, iov[0].iov_len);  // a short read is allowed
}

__attribute__((visibility("default"))) ssize_t writev(int fd, const iovec* iov, int iovcnt) {
    DataRoute r = route_write(fd, iov, iovcnt, 0);
    if (r.answered) return r.answer;
    if (r.entry == nullptr) return libc().writev(fd, iov, iovcnt);
    return conn_writev(*r.entry, iov, iovcnt);
}

__attribute__((visibility("default"))) int shutdown(int fd, int how) {
    EntryRef e = ours(fd);
    if (e == nullptr || e->state != SocketState::Rdma) return libc().shutdown(fd, how);
    TransportCall inside;
    return e->connection->shutdown(how);
}

__attribute__((visibility("default"))) int getsockopt(int fd, int level, int name, void* value, socklen_t* len) {
    EntryRef e = ours(fd);
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
    EntryRef e = ours(fd);
    return libc().setsockopt(e == nullptr ? fd : socket_of(*e, fd), level, name, value, len);
}

__attribute__((visibility("default"))) int getsockname(int fd, sockaddr* addr, socklen_t* len) {
    EntryRef e = ours(fd);
    return libc().getsockname(e == nullptr ? fd : socket_of(*e, fd), addr, len);
}

__attribute__((visibility("default"))) int getpeername(int fd, sockaddr* addr, socklen_t* len) {
    EntryRef e = ours(fd);
    return libc().getpeername(e == nullptr ? fd : socket_of(*e, fd), addr, len);
}

}  // extern "C"
