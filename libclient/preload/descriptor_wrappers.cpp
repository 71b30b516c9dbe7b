// Calls that copy, replace or close descriptor numbers without close():
// dup, dup2, dup3, fcntl(F_DUPFD*), close_range, closefrom, fclose, and
// close made as syscall(SYS_close, fd) (libuv's on Linux, so Node's: it
// steps around glibc's cancellation point). On
// a number this library looks after they keep the SocketTable true:
//   - a copy of an upgraded socket (dup; Python's socket.fromfd) is another
//     number for the same session, as a dup'ed socket is for the same TCP
//     connection: both move the session's bytes, and it ends with the last;
//   - a number replaced (dup2/dup3 onto it) or closed in bulk (close_range,
//     closefrom, fclose of an fdopen'ed socket) stops being the session's,
//     so the next file to get that number is never mistaken for it.
// Other numbers go to libc untouched, at the cost of one atomic load.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <linux/close_range.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstdint>

#include "libclient/preload/driver_policy.hpp"
#include "libclient/preload/epoll_registry.hpp"
#include "libclient/preload/inherited_session.hpp"
#include "libclient/preload/libc_calls.hpp"
#include "libclient/preload/socket_io.hpp"
#include "libclient/preload/socket_table.hpp"

using namespace pg_rdma::client;

namespace {

// Whether this call must keep the tables true. Not in a vfork child, whose
// closes must leave the parent's sessions alone (SocketTable::owned_here()).
// in_transport() is not asked: a signal handler interrupting a transport
// call is the program's, and its closes count.
bool watching() noexcept {
    return (SocketTable::instance().any() || !EpollRegistry::instance().empty() || any_candidates()) &&
           SocketTable::owned_here();
}

// `copy` is now a duplicate of `fd`: it names `fd`'s session too. When the
// table cannot say so (`copy` beyond its range), the copy is a plain
// descriptor, as any number this library never saw. (The transport's own
// copy of a session's TCP socket is made by the system call, not through
// here: counted as a number of the session, it kept every session alive
// after the program's last close.)
void copied(int fd, int copy) noexcept {
    if (copy < 0 || copy == fd) return;
    // A driver's connection not upgraded yet, now with two numbers: it stays
    // on TCP (an upgrade would move only one of them).
    if (take_candidate(fd) && !EpollRegistry::instance().empty()) EpollRegistry::instance().forget_descriptor(fd);
    if (SocketTable::instance().any()) (void)SocketTable::instance().alias(fd, copy);
}

// `fd` is about to be replaced or closed by a call that is not close():
// forget what this library knew of it (the session ends with its last
// number).
void dropping(int fd) noexcept {
    (void)take_candidate(fd);
    if (!EpollRegistry::instance().empty()) EpollRegistry::instance().forget_descriptor(fd);
    if (SocketTable::instance().any()) (void)SocketTable::instance().remove(fd, end_session);
}

bool is_dup_command(int cmd) noexcept { return cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC; }

// fcntl and fcntl64 take one argument of a type that depends on the
// command; like glibc, pass it on as a word.
int fcntl_with(int (*real)(int, int, ...), int fd, int cmd, void* arg) noexcept {
    if (cmd == F_SETFL && SocketTable::instance().any()) {
        // A session upgraded at its first write waits in reads and writes
        // as the program's socket would (socket_io.hpp): it follows the flag.
        const int rc = real(fd, cmd, arg);
        if (rc == 0)
            if (const EntryRef e = SocketTable::instance().find(fd); e != nullptr && e->by_first_write)
                e->blocking = (reinterpret_cast<std::intptr_t>(arg) & O_NONBLOCK) == 0;
        return rc;
    }
    if (!is_dup_command(cmd) || !watching()) return real(fd, cmd, arg);
    const int copy = real(fd, cmd, arg);
    if (copy >= 0) copied(fd, copy);
    return copy;
}

}  // namespace

// Named by assembler name: with _FILE_OFFSET_BITS=64 glibc's header makes
// `fcntl` in C++ mean the symbol fcntl64, and both must be ours.
extern "C" int fcntl_wrapper(int fd, int cmd, ...) __asm__("fcntl");
extern "C" int fcntl64_wrapper(int fd, int cmd, ...) __asm__("fcntl64");

extern "C" {

__attribute__((visibility("default"))) int dup(int fd) {
    if (!watching()) return libc().dup(fd);
    const int copy = libc().dup(fd);
    if (copy >= 0) copied(fd, copy);
    return copy;
}

__attribute__((visibility("default"))) int dup2(int fd, int target) {
    if (!watching() || fd == target) return libc().dup2(fd, target);
    // Only once the call can succeed: dup2 with a bad fd leaves target open.
    if (libc().fcntl(fd, F_GETFD) < 0) return libc().dup2(fd, target);
    dropping(target);
    const int rc = libc().dup2(fd, target);
    if (rc >= 0) copied(fd, target);
    return rc;
}

__attribute__((visibility("default"))) int dup3(int fd, int target, int flags) {
    if (!watching() || fd == target || (flags & ~O_CLOEXEC) != 0) return libc().dup3(fd, target, flags);
    if (libc().fcntl(fd, F_GETFD) < 0) return libc().dup3(fd, target, flags);
    dropping(target);
    const int rc = libc().dup3(fd, target, flags);
    if (rc >= 0) copied(fd, target);
    return rc;
}

__attribute__((visibility("default"))) int fcntl_wrapper(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    void* arg = va_arg(ap, void*);
    va_end(ap);
    return fcntl_with(libc().fcntl, fd, cmd, arg);
}

__attribute__((visibility("default"))) int fcntl64_wrapper(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    void* arg = va_arg(ap, void*);
    va_end(ap);
    return fcntl_with(libc().fcntl64 != nullptr ? libc().fcntl64 : libc().fcntl, fd, cmd, arg);
}

// FIONREAD on a session answers for its bytes (the number itself is the
// transport's epoll descriptor, which would say ENOTTY): pgJDBC's
// getNotifications() asks it, and the JDK's SSLSocket.close() drains with
// it. FIONBIO is followed as fcntl(F_SETFL) is.
__attribute__((visibility("default"))) int ioctl(int fd, unsigned long request, ...) {
    va_list ap;
    va_start(ap, request);
    void* arg = va_arg(ap, void*);
    va_end(ap);
    if ((request != FIONREAD && request != FIONBIO) || !SocketTable::instance().any() || in_transport())
        return libc().ioctl(fd, request, arg);
    const EntryRef e = SocketTable::instance().find(fd);
    if (e == nullptr || (e->state != SocketState::Rdma && !(e->by_first_write && e->state == SocketState::Upgrading)))
        return libc().ioctl(fd, request, arg);
    if (request == FIONBIO) {
        const int rc = libc().ioctl(fd, request, arg);
        if (rc == 0 && arg != nullptr && e->by_first_write) e->blocking = *static_cast<const int*>(arg) == 0;
        return rc;
    }
    if (arg == nullptr) {
        errno = EFAULT;
        return -1;
    }
    int available = 0;
    if (e->state == SocketState::Rdma && !forked_away(*e)) {
        TransportCall inside;
        // The bytes waiting, as the kernel says of a socket: 0 at EOF,
        // though EOF makes the connection readable. A caller draining with
        // "while (FIONREAD > 0) read" (the JDK's SSLSocket.close()) would
        // otherwise spin for ever on a peer that has closed.
        available = static_cast<int>(std::min<std::size_t>(e->connection->readable_bytes(), INT_MAX));
    }
    *static_cast<int*>(arg) = available;
    return 0;
}

__attribute__((visibility("default"))) int close_range(unsigned int first, unsigned int last, int flags) {
    // CLOSE_RANGE_CLOEXEC only marks them; nothing closes now. With
    // CLOSE_RANGE_UNSHARE the caller closes them in a private copy of the
    // table another thread may still use; the sessions end all the same.
    if ((flags & CLOSE_RANGE_CLOEXEC) == 0 && first <= last && watching()) {
        const unsigned int top = last < static_cast<unsigned int>(SocketTable::kSlots - 1)
                                     ? last
                                     : static_cast<unsigned int>(SocketTable::kSlots - 1);
        drop_candidates(first, last);
        if (!EpollRegistry::instance().empty()) EpollRegistry::instance().forget_range(first, last);
        if (SocketTable::instance().any())
            for (unsigned int fd = first; fd <= top && SocketTable::instance().any(); ++fd)
                (void)SocketTable::instance().remove(static_cast<int>(fd), end_session);
    }
    if (libc().close_range == nullptr)
        return static_cast<int>(libc_syscall()(SYS_close_range, first, last, static_cast<unsigned int>(flags)));
    return libc().close_range(first, last, flags);
}

__attribute__((visibility("default"))) void closefrom(int lowest) {
    if (lowest >= 0 && watching()) {
        drop_candidates(static_cast<unsigned int>(lowest), UINT_MAX);
        if (!EpollRegistry::instance().empty())
            EpollRegistry::instance().forget_range(static_cast<unsigned int>(lowest), UINT_MAX);
        for (int fd = lowest; fd < SocketTable::kSlots && SocketTable::instance().any(); ++fd)
            (void)SocketTable::instance().remove(fd, end_session);
    }
    if (libc().closefrom != nullptr) libc().closefrom(lowest);
    else if (lowest >= 0) (void)libc_syscall()(SYS_close_range, static_cast<unsigned int>(lowest), ~0U, 0U);
}

// libuv closes every descriptor this way, so without it a Node program's
// sessions would outlive their sockets, and the next socket to get the
// number would be taken for the old session. The number itself is closed
// by the system call, as asked: not through glibc's close(), a
// cancellation point, which is what the caller stepped around. Every
// other call goes to libc's syscall unchanged: six arguments, as many as
// the kernel takes (those the caller did not pass are whatever its
// registers and stack slot hold, as glibc's own syscall reads them). This
// library's own system calls go to libc's directly (libc_syscall).
// AddressSanitizer would call the unpassed arguments' read a stack
// underflow (libstdc++'s guard of a static calls syscall(SYS_futex) with
// four): it is the read glibc's syscall makes, so it is not instrumented.
__attribute__((visibility("default"), no_sanitize_address)) long syscall(long number, ...) {
    std::va_list args;
    va_start(args, number);
    long a[6];
    for (long& arg : a) arg = va_arg(args, long);
    va_end(args);
    if (number == SYS_close) return close_number(static_cast<int>(a[0]), KernelClose::SystemCall);
    return libc_syscall()(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

__attribute__((visibility("default"))) int fclose(FILE* stream) {
    // (stream is declared nonnull: fclose(NULL) is undefined, as in libc.)
    if (watching()) {
        const int fd = fileno(stream);
        if (fd >= 0) dropping(fd);
    }
    return libc().fclose(stream);
}

}  // extern "C"
