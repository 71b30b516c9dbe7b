// The address and msghdr forms of the data calls (recvfrom, sendto,
// recvmsg, sendmsg), which drivers and runtimes use where libpq uses
// recv/send. On an upgraded descriptor they mean what they mean on a
// connected TCP socket: no address (or the peer's, ignored), no ancillary
// data. What TCP would do differently (MSG_PEEK, MSG_OOB, SCM_RIGHTS) is
// refused with EOPNOTSUPP rather than imitated. Other descriptors go to
// libc untouched.
#include <sys/socket.h>

#include <cerrno>
#include <climits>

#include "libclient/preload/libc_calls.hpp"
#include "libclient/preload/socket_io.hpp"

using namespace pg_rdma::client;

namespace {

constexpr int kRecvFlags = MSG_DONTWAIT | MSG_NOSIGNAL | MSG_CMSG_CLOEXEC;
constexpr int kSendFlags = MSG_DONTWAIT | MSG_NOSIGNAL | MSG_MORE;

ssize_t unsupported() noexcept {
    errno = EOPNOTSUPP;
    return -1;
}

// A read into the first non-empty buffer of the list (a short read is
// allowed, as readv's is).
ssize_t read_into(SocketEntry& e, const iovec* iov, std::size_t count, int flags) noexcept {
    if (iov == nullptr && count > 0) {
        errno = EFAULT;
        return -1;
    }
    for (std::size_t i = 0; i < count; ++i)
        if (iov[i].iov_len > 0) return conn_read(e, iov[i].iov_base, iov[i].iov_len, flags);
    return conn_read(e, nullptr, 0, flags);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) ssize_t recvfrom(int fd, void* buf, size_t len, int flags, sockaddr* from,
                                                        socklen_t* from_len) {
    DataRoute r = route_read(fd, flags);
    if (r.answered) return r.answer;
    if (r.entry == nullptr) return libc().recvfrom(fd, buf, len, flags, from, from_len);
    if ((flags & ~kRecvFlags) != 0) return unsupported();
    // A connected stream socket leaves the address alone (Linux reports a
    // zero length for TCP).
    if (from_len != nullptr) *from_len = 0;
    return conn_read(*r.entry, buf, len, flags);
}

__attribute__((visibility("default"))) ssize_t sendto(int fd, const void* buf, size_t len, int flags,
                                                      const sockaddr* to, socklen_t to_len) {
    const iovec one{const_cast<void*>(buf), len};
    DataRoute r = route_write(fd, &one, 1, flags);
    if (r.answered) return r.answer;
    if (r.entry == nullptr) return libc().sendto(fd, buf, len, flags, to, to_len);
    if ((flags & ~kSendFlags) != 0) return unsupported();
    // TCP ignores an address on a connected socket; so does a session.
    return conn_write(*r.entry, buf, len, flags);
}

__attribute__((visibility("default"))) ssize_t recvmsg(int fd, msghdr* msg, int flags) {
    DataRoute r = route_read(fd, flags);
    if (r.answered) return r.answer;
    if (r.entry == nullptr) return libc().recvmsg(fd, msg, flags);
    if ((flags & ~kRecvFlags) != 0) return unsupported();
    if (msg == nullptr) {
        errno = EFAULT;
        return -1;
    }
    const ssize_t n = read_into(*r.entry, msg->msg_iov, msg->msg_iovlen, flags);
    if (n >= 0) {
        msg->msg_namelen = 0;
        msg->msg_controllen = 0;  // no ancillary data ever arrives
        msg->msg_flags = 0;
    }
    return n;
}

__attribute__((visibility("default"))) ssize_t sendmsg(int fd, const msghdr* msg, int flags) {
    // The first write is judged on its bytes only when the message is
    // readable; a bad one goes to libc, which says what is wrong with it.
    DataRoute r = msg != nullptr && msg->msg_controllen == 0 && msg->msg_iovlen <= static_cast<std::size_t>(IOV_MAX)
                      ? route_write(fd, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags)
                      : route_write(fd, nullptr, 0, flags);
    if (r.answered) return r.answer;
    if (r.entry == nullptr) return libc().sendmsg(fd, msg, flags);
    SocketEntry* e = r.entry.get();
    if ((flags & ~kSendFlags) != 0) return unsupported();
    if (msg == nullptr) {
        errno = EFAULT;
        return -1;
    }
    // Descriptors or credentials cannot travel over a session.
    if (msg->msg_controllen > 0) return unsupported();
    if (msg->msg_iov == nullptr && msg->msg_iovlen > 0) {
        errno = EFAULT;
        return -1;
    }
    if (msg->msg_iovlen > static_cast<std::size_t>(IOV_MAX)) {
        errno = EMSGSIZE;
        return -1;
    }
    return conn_writev(*e, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
}

}  // extern "C"
