#include "libclient/preload/session_moves.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <dirent.h>
#include <sys/epoll.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "libclient/preload/epoll_registry.hpp"
#include "libclient/preload/libc_calls.hpp"

namespace pg_rdma::client {
namespace {

// The options the program set on its socket before connect(), for the new
// one (those it cannot set, such as SO_MARK without the capability, it
// could not have set either).
void copy_socket_options(int from, int to, int family) {
    struct Option {
        int level, name;
    };
    static constexpr Option kOptions[] = {
        {IPPROTO_TCP, TCP_NODELAY},   {SOL_SOCKET, SO_KEEPALIVE},    {IPPROTO_TCP, TCP_KEEPIDLE},
        {IPPROTO_TCP, TCP_KEEPINTVL}, {IPPROTO_TCP, TCP_KEEPCNT},    {IPPROTO_TCP, TCP_USER_TIMEOUT},
        {SOL_SOCKET, SO_PRIORITY},    {SOL_SOCKET, SO_MARK},
    };
    for (const Option& o : kOptions) {
        int value = 0;
        socklen_t len = sizeof value;
        if (libc().getsockopt(from, o.level, o.name, &value, &len) == 0)
            (void)libc().setsockopt(to, o.level, o.name, &value, len);
    }
    int tos = 0;
    socklen_t tos_len = sizeof tos;
    const int level = family == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP;
    const int name = family == AF_INET6 ? IPV6_TCLASS : IP_TOS;
    if (libc().getsockopt(from, level, name, &tos, &tos_len) == 0) (void)libc().setsockopt(to, level, name, &tos, tos_len);
    // Not SO_RCVBUF/SO_SNDBUF: what getsockopt reports of a default cannot
    // be told from a value set, and setting one ends the kernel's autotuning.
    linger l{};
    socklen_t l_len = sizeof l;
    if (libc().getsockopt(from, SOL_SOCKET, SO_LINGER, &l, &l_len) == 0 && l.l_onoff != 0)
        (void)libc().setsockopt(to, SOL_SOCKET, SO_LINGER, &l, l_len);
}

// The new socket leaves from the address the old one did (a program that
// bound its socket, a multi-homed host whose pg_hba or firewall knows that
// address), on a port of the kernel's choosing.
void bind_like(int from, int to) {
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (libc().getsockname(from, reinterpret_cast<sockaddr*>(&local), &len) < 0) return;
    if (local.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&local)->sin_port = 0;
    else if (local.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&local)->sin6_port = 0;
    else return;
    // The port is chosen at connect(), as without bind(): ephemeral ports
    // are shared between destinations as usual.
    const int one = 1;
    (void)libc().setsockopt(to, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    (void)::bind(to, reinterpret_cast<const sockaddr*>(&local), len);
}

// Registrations of `fd` in the program's epoll sets that the registry does
// not know (made before connect(), as Netty's and Asio's event loops do, or
// before the library saw the number) are read from /proc/self/fdinfo (the
// kernel lists each watched descriptor with its events and data), so that
// rebind_epoll() moves them too: left on the TCP socket kept open beside
// the session, they would never report its bytes.
}  // namespace

void adopt_epoll_registrations(int fd) {
    DIR* dir = ::opendir("/proc/self/fd");
    if (dir == nullptr) return;
    const int skip = ::dirfd(dir);
    char target[64];
    char path[64];
    while (const dirent* d = ::readdir(dir)) {
        char* end = nullptr;
        const long n = std::strtol(d->d_name, &end, 10);
        if (end == d->d_name || *end != '\0' || n == fd || n == skip || n < 0 || n > INT_MAX) continue;
        std::snprintf(path, sizeof path, "/proc/self/fd/%ld", n);
        const ssize_t len = ::readlink(path, target, sizeof target - 1);
        if (len <= 0) continue;
        target[len] = '\0';
        if (std::strcmp(target, "anon_inode:[eventpoll]") != 0) continue;
        std::snprintf(path, sizeof path, "/proc/self/fdinfo/%ld", n);
        const int info = ::open(path, O_RDONLY | O_CLOEXEC);
        if (info < 0) continue;
        std::string text;
        char buffer[4096];
        for (ssize_t got; (got = libc().read(info, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(got));
        libc().close(info);
        for (std::size_t at = text.find("tfd:"); at != std::string::npos; at = text.find("tfd:", at + 4)) {
            int watched = -1;
            unsigned events = 0;
            unsigned long long data = 0;
            if (std::sscanf(text.c_str() + at, "tfd: %d events: %x data: %llx", &watched, &events, &data) != 3 ||
                watched != fd)
                continue;
            const int epfd = static_cast<int>(n);
            bool known = false;
            for (const EpollRegistration& r : EpollRegistry::instance().naming(fd)) known = known || r.epfd == epfd;
            if (known) continue;
            epoll_data_t value;
            value.u64 = data;
            EpollRegistry::instance().put({epfd, fd, events, value});
        }
    }
    ::closedir(dir);
}

int tcp_connect_state(int fd) noexcept {
    pollfd p{fd, POLLOUT, 0};
    if (libc().poll(&p, 1, 0) == 0) return EINPROGRESS;
    int error = 0;
    socklen_t len = sizeof error;
    if (libc().getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) < 0) return errno;
    return error;
}

int reconnect(int fd, const SocketEntry& entry) {
    if (entry.by_first_write) adopt_epoll_registrations(fd);
    const int fresh = ::socket(entry.peer.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fresh < 0) return errno;
    copy_socket_options(fd, fresh, entry.peer.ss_family);
    bind_like(fd, fresh);
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
    if (entry.by_first_write) adopt_epoll_registrations(fd);
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
