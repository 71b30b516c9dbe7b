#include "libclient/preload/inherited_session.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>

#include "libclient/preload/epoll_registry.hpp"
#include "libclient/preload/libc_calls.hpp"

namespace pg_rdma::client {
namespace {

// Initial-exec TLS, like in_transport(): no allocation on first use.
thread_local int t_letting_go __attribute__((tls_model("initial-exec"))) = 0;

bool inherited(const SocketEntry& e) noexcept {
    return e.state == SocketState::Rdma && e.connection && !e.connection->made_in_this_process();
}

// Puts `relay` under `fd` with the file flags libpq gave its socket
// (non-blocking, close-on-exec). 0 or an errno.
//
// Epoll registrations of the number are forgotten, not moved: an epoll set
// made before the fork is shared with the parent, and the child must not
// change what the parent's set watches. (The kernel keeps the parent's
// registration: it names the file the number had, not the number.)
int move_under(int relay, int fd, int tcp_fd) noexcept {
    const int status = libc().fcntl(tcp_fd, F_GETFL);
    if (status >= 0 && (status & O_NONBLOCK) != 0) {
        const int own = libc().fcntl(relay, F_GETFL);
        if (own < 0 || libc().fcntl(relay, F_SETFL, own | O_NONBLOCK) < 0) return errno;
    }
    const int fd_flags = libc().fcntl(fd, F_GETFD);
    const int dup_flags = (fd_flags >= 0 && (fd_flags & FD_CLOEXEC) != 0) ? O_CLOEXEC : 0;
    if (libc().dup3(relay, fd, dup_flags) < 0) return errno;
    if (!EpollRegistry::instance().empty()) EpollRegistry::instance().forget_descriptor(fd);
    return 0;
}

}  // namespace

EntryRef find_adopting(int fd) noexcept {
    EntryRef e = SocketTable::instance().find(fd);
    if (e == nullptr || !inherited(*e) || t_letting_go > 0) return e;
    TransportCall inside;
    const int relay = e->connection->adopt_in_child();
    if (relay < 0) return e;
    const int moved = move_under(relay, fd, e->tcp_fd);
    libc().close(relay);
    if (moved != 0) {
        // The parent handed the session over and it is lost with the relay
        // socket: libpq reads the error from the entry.
        e->state = SocketState::Failed;
        e->failed_errno = moved;
        return e;
    }
    if (e->tcp_fd >= 0) libc().close(e->tcp_fd);  // our copy; the parent keeps its own
    e->tcp_fd = -1;
    e = EntryRef();
    // Destroying the entry lets go of the Connection object; in a child
    // that is not the queue pair.
    SocketTable::instance().remove(fd);
    return {};
}

bool forked_away(const SocketEntry& entry) noexcept {
    if (!inherited(entry)) return false;
    if (t_letting_go > 0) return true;
    // Per process: a child's child says it again.
    static std::atomic<pid_t> warned{0};
    const pid_t self = getpid();
    if (warned.exchange(self) != self) {
        char line[640];
        const int n = std::snprintf(
            line, sizeof line,
            "libpq_rdma: process %d cannot use an RDMA connection made before it was forked: a queue pair "
            "does not follow fork(). A child takes such a connection over only by reading, writing or "
            "waiting in poll/select on it before its parent uses it again (not through an epoll set made "
            "before the fork). Make the connection in the process that uses it, or connect with "
            "with_rsocket=false\n",
            static_cast<int>(self));
        // Straight to the kernel: this library wraps write().
        if (n > 0) (void)!libc_syscall()(SYS_write, 2, line, static_cast<std::size_t>(n) < sizeof line ? n : sizeof line - 1);
    }
    return true;
}

LettingGo::LettingGo() noexcept { ++t_letting_go; }
LettingGo::~LettingGo() { --t_letting_go; }

}  // namespace pg_rdma::client
