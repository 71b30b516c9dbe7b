#include "libclient/preload/session_moves.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "libclient/preload/epoll_registry.hpp"
#include "libclient/preload/libc_calls.hpp"

namespace pg_rdma::client {
namespace {

// The options the program set on its socket before connect(), for the new one.
void copy_socket_options(int from, int to) {
    struct Option {
        int level, name;
    };
    static constexpr Option kOptions[] = {
        {IPPROTO_TCP, TCP_NODELAY},   {SOL_SOCKET, SO_KEEPALIVE},    {IPPROTO_TCP, TCP_KEEPIDLE},
        {IPPROTO_TCP, TCP_KEEPINTVL}, {IPPROTO_TCP, TCP_KEEPCNT},    {IPPROTO_TCP, TCP_USER_TIMEOUT},
    };
    for (const Option& o : kOptions) {
        int value = 0;
        socklen_t len = sizeof value;
        if (libc().getsockopt(from, o.level, o.name, &value, &len) == 0)
            (void)libc().setsockopt(to, o.level, o.name, &value, len);
    }
}

}  // namespace

int tcp_connect_state(int fd) noexcept {
    pollfd p{fd, POLLOUT, 0};
    if (libc().poll(&p, 1, 0) == 0) return EINPROGRESS;
    int error = 0;
    socklen_t len = sizeof error;
    if (libc().getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) < 0) return errno;
    return error;
}

int reconnect(int fd, const SocketEntry& entry) {
    const int fresh = ::socket(entry.peer.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fresh < 0) return errno;
    copy_socket_options(fd, fresh);
    const int flags = libc().fcntl(fd, F_GETFD);
    const int moved = rebind_epoll(fd, false, [&] {
        return libc().dup3(fresh, fd, (flags >= 0 && (flags & FD_CLOEXEC) != 0) ? O_CLOEXEC : 0) < 0 ? errno : 0;
    });
    if (moved != 0) {
        libc().close(fresh);
        return moved;
    }
    libc().close(fresh);
    if (libc().connect(fd, reinterpret_cast<const sockaddr*>(&entry.peer), entry.peer_len) < 0 &&
        errno != EINPROGRESS && errno != EINTR)
        return errno;
    return 0;
}

int take_over(int fd, SocketEntry& entry, std::unique_ptr<transport::Connection> connection) {
    const int flags = libc().fcntl(fd, F_GETFD);
    const int tcp = libc().fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (tcp < 0) return errno;
    const int moved = rebind_epoll(fd, true, [&] {
        return libc().dup3(connection->fd(), fd, (flags >= 0 && (flags & FD_CLOEXEC) != 0) ? O_CLOEXEC : 0) < 0 ? errno : 0;
    });
    if (moved != 0) {
        libc().close(tcp);
        return moved;
    }
    entry.tcp_fd = tcp;
    entry.connection = std::move(connection);
    entry.state = SocketState::Rdma;
    return 0;
}

}  // namespace pg_rdma::client
