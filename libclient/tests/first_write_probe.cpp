// A program that speaks to a TCP peer itself, as a driver does, for the
// host test of the first-write path (first_write_host_test.sh). It is both
// ends: a listener on 127.0.0.1 and a client socket that connects to it and
// does what MODE says; the listener's side reports what arrived. Run under
// libpq_rdma.so with a servers file or WITH_RSOCKET (the host has no RDMA
// device, so an upgrade falls back, or fails with require).
//   first_write_probe MODE      one exchange; prints lines the test checks
//   first_write_probe listen    prints a port, accepts and holds connections
//                               for 20 s without a word (a silent server)
//   first_write_probe server HOST PORT
//                               to a real PostgreSQL server, as an event loop
//                               that registered its socket with epoll before
//                               connect() (Netty, Asio): sends a
//                               StartupMessage, waits in epoll_wait, prints
//                               the reply's first byte ("reply R": the
//                               server asks for authentication)
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kWaitMs = 3000;

[[noreturn]] void die(const char* what) {
    std::printf("probe: %s: %s\n", what, std::strerror(errno));
    std::exit(2);
}

// A StartupMessage for user "app", database "db" (protocol 3.0).
std::string startup_packet() {
    const std::string pairs("user\0app\0database\0db\0\0", 22);
    std::string packet(8, '\0');
    const std::uint32_t length = htonl(static_cast<std::uint32_t>(8 + pairs.size()));
    const std::uint32_t version = htonl(3u << 16);
    std::memcpy(packet.data(), &length, 4);
    std::memcpy(packet.data() + 4, &version, 4);
    return packet + pairs;
}

std::string cancel_packet() {
    std::string packet(16, '\0');
    const std::uint32_t words[4] = {htonl(16), htonl((1234u << 16) | 5678u), htonl(4242), htonl(99)};
    std::memcpy(packet.data(), words, sizeof words);
    return packet;
}

int listener(std::uint16_t& port) {
    const int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l < 0) die("socket");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0 || ::listen(l, 16) < 0) die("listen");
    socklen_t len = sizeof a;
    if (::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) < 0) die("getsockname");
    port = ntohs(a.sin_port);
    return l;
}

int client(std::uint16_t port, bool mapped, int epfd) {
    const int c = ::socket(mapped ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c < 0) die("socket");
    if (epfd >= 0) {  // registered before connect(), as Netty's and Asio's loops do
        epoll_event ev{EPOLLIN, {}};
        ev.data.u64 = 77;
        if (::epoll_ctl(epfd, EPOLL_CTL_ADD, c, &ev) < 0) die("epoll_ctl");
    }
    int rc;
    if (mapped) {
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_port = htons(port);
        ::inet_pton(AF_INET6, "::ffff:127.0.0.1", &a.sin6_addr);
        rc = ::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a);
    } else {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        rc = ::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a);
    }
    if (rc < 0) die("connect");
    return c;
}

// What the server's side received within the wait (until the client's
// side is closed or nothing more comes).
std::string drain(int s) {
    std::string got;
    char buffer[65536];
    for (;;) {
        pollfd p{s, POLLIN, 0};
        if (::poll(&p, 1, got.empty() ? kWaitMs : 200) <= 0) break;
        const ssize_t n = ::read(s, buffer, sizeof buffer);
        if (n <= 0) break;
        got.append(buffer, static_cast<std::size_t>(n));
    }
    return got;
}

bool g_refused = false;  // a write said ECONNREFUSED (require, no RDMA)

void report_sent(const char* what, ssize_t n) {
    if (n < 0 && errno == ECONNREFUSED) g_refused = true;
    if (n < 0) std::printf("%s: %s\n", what, strerrorname_np(errno));
    else std::printf("%s %zd\n", what, n);
}

void report_server(const std::string& got, const std::string& expected) {
    std::printf("server got %zu bytes %s\n", got.size(), got == expected ? "as sent" : "changed");
}

// The client's side reads the server's reply ("hello"), waiting as `how` says.
void read_reply(int c, int epfd) {
    if (epfd >= 0) {
        epoll_event ev{};
        const int n = ::epoll_wait(epfd, &ev, 1, kWaitMs);
        if (n != 1 || ev.data.u64 != 77) {
            std::printf("epoll_wait: %d events\n", n);
            return;
        }
    } else {
        pollfd p{c, POLLIN, 0};
        if (::poll(&p, 1, kWaitMs) != 1) {
            std::printf("poll: no reply\n");
            return;
        }
    }
    char buffer[16] = {};
    const ssize_t n = ::read(c, buffer, sizeof buffer - 1);
    if (n < 0) std::printf("client read: %s\n", strerrorname_np(errno));
    else std::printf("client got %s\n", buffer);
}

int to_server(const char* host, const char* port_text) {
    const int epfd = ::epoll_create1(EPOLL_CLOEXEC);
    const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (epfd < 0 || c < 0) die("socket");
    // Registered once, before connect(), and never changed: the library
    // learns of it only from the kernel (/proc/self/fdinfo).
    epoll_event ev{EPOLLIN | EPOLLOUT, {}};
    ev.data.u64 = 77;
    if (::epoll_ctl(epfd, EPOLL_CTL_ADD, c, &ev) < 0) die("epoll_ctl");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(std::atoi(port_text)));
    if (::inet_pton(AF_INET, host, &a.sin_addr) != 1) die("inet_pton");
    if (::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0 && errno != EINPROGRESS) die("connect");
    epoll_event got{};
    if (::epoll_wait(epfd, &got, 1, 10000) != 1 || (got.events & EPOLLOUT) == 0) die("epoll_wait (connect)");
    const std::string sent = startup_packet();
    report_sent("send", ::send(c, sent.data(), sent.size(), MSG_NOSIGNAL));
    // Level-triggered EPOLLOUT comes with every wait: read until the reply.
    for (;;) {
        const int n = ::epoll_wait(epfd, &got, 1, 10000);
        if (n == 1 && (got.events & EPOLLIN) == 0) continue;
        if (n != 1 || got.data.u64 != 77) {
            std::printf("epoll_wait: %d events\n", n);
            return 1;
        }
        char reply = 0;
        const ssize_t r = ::read(c, &reply, 1);
        if (r == 1) {
            std::printf("reply %c\n", reply);
            return 0;
        }
        if (r == 0 || errno != EAGAIN) {
            std::printf("read: %s\n", r == 0 ? "end" : strerrorname_np(errno));
            return 1;
        }
    }
}

int hold_connections() {
    std::uint16_t port = 0;
    const int l = listener(port);
    std::printf("%u\n", port);
    std::fflush(stdout);
    std::vector<int> held;
    for (;;) {
        pollfd p{l, POLLIN, 0};
        if (::poll(&p, 1, 20000) <= 0) return 0;
        const int s = ::accept(l, nullptr, nullptr);
        if (s >= 0) held.push_back(s);
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 4 && std::strcmp(argv[1], "server") == 0) return to_server(argv[2], argv[3]);
    if (argc != 2) {
        std::fprintf(stderr, "usage: first_write_probe MODE\n");
        return 2;
    }
    const std::string mode = argv[1];
    if (mode == "listen") return hold_connections();
    std::uint16_t port = 0;
    const int l = listener(port);
    const int epfd = mode == "epoll_before_connect" ? ::epoll_create1(EPOLL_CLOEXEC) : -1;
    int c = client(port, mode == "mapped", epfd);
    const int s = ::accept(l, nullptr, nullptr);
    if (s < 0) die("accept");
    std::string sent = startup_packet();
    if (mode == "startup" || mode == "mapped") {
        report_sent("send", ::send(c, sent.data(), sent.size(), MSG_NOSIGNAL));
    } else if (mode == "nonblocking" || mode == "epoll_before_connect") {
        if (::fcntl(c, F_SETFL, ::fcntl(c, F_GETFL) | O_NONBLOCK) < 0) die("fcntl");
        report_sent("send", ::send(c, sent.data(), sent.size(), MSG_NOSIGNAL));
    } else if (mode == "split") {  // the header in two writes: not judged, left alone
        report_sent("write", ::write(c, sent.data(), 4));
        report_sent("write", ::write(c, sent.data() + 4, sent.size() - 4));
    } else if (mode == "writev") {
        const iovec parts[2] = {{sent.data(), 8}, {sent.data() + 8, sent.size() - 8}};
        report_sent("writev", ::writev(c, parts, 2));
    } else if (mode == "cancel") {
        sent = cancel_packet();
        report_sent("send", ::send(c, sent.data(), sent.size(), MSG_NOSIGNAL));
    } else if (mode == "http") {
        sent = "GET / HTTP/1.0\r\n\r\n";
        report_sent("send", ::send(c, sent.data(), sent.size(), MSG_NOSIGNAL));
    } else if (mode == "read_first") {  // the server speaks first: not PostgreSQL
        if (::write(s, "hi", 2) != 2) die("write");
        char greeting[2];
        if (::read(c, greeting, sizeof greeting) != 2) die("read");
        report_sent("send", ::send(c, sent.data(), sent.size(), MSG_NOSIGNAL));
    } else if (mode == "dup") {  // a second number before the first write: stays TCP
        const int copy = ::dup(c);
        report_sent("send", ::send(c, sent.data(), sent.size(), MSG_NOSIGNAL));
        ::close(copy);
    } else if (mode == "null_buffer") {
        const iovec parts[1] = {{nullptr, 64}};
        report_sent("writev", ::writev(c, parts, 1));
        sent.clear();
    } else {
        std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
        return 2;
    }
    // A refused write (require) leaves nothing to say: close at once so
    // that the server's side sees the end rather than waiting for it.
    if (g_refused) {
        ::close(c);
        c = -1;
    }
    const std::string got = drain(s);
    report_server(got, sent);
    if (!got.empty()) {
        if (::write(s, "hello", 5) != 5) die("write");
        read_reply(c, epfd);
    }
    if (c >= 0) ::close(c);
    ::close(s);
    return 0;
}
