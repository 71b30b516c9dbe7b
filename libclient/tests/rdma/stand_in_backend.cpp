// TEST ONLY — a stand-in for the pg_rdma backend, so the client library can
// be tested end to end before the server extension upgrades sessions. It is
// a relay, which the product must never be (ARCHITECTURE.md: it hides the
// client's address from pg_hba); here it only lets a real psql and a real
// libpq talk to a real PostgreSQL 15 over a real RDMA connection.
//
//   stand_in_backend LISTEN_IP LISTEN_PORT PG_PORT LOG_FILE
//
// Accepts TCP on LISTEN_IP:LISTEN_PORT; for each connection a child reads
// the first packet: our upgrade request -> transport::upgrade_server, then
// relays the RDMA connection to 127.0.0.1:PG_PORT; anything else -> relays
// the TCP connection (those first bytes included). One line per session in
// LOG_FILE: "rdma", "tcp" (no upgrade asked) or "declined ...". Prints
// "ready" on stdout once listening; runs until killed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "protocol/upgrade.hpp"
#include "transport/tcp_upgrade.hpp"

namespace transport = pg_rdma::transport;
namespace protocol = pg_rdma::protocol;

namespace {

const char* g_log = nullptr;

void log_line(const std::string& line) {
    if (FILE* f = std::fopen(g_log, "a")) {
        std::fprintf(f, "%s\n", line.c_str());
        std::fclose(f);
    }
}

int connect_pg(int port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        std::perror("stand_in_backend: connect to PostgreSQL");
        std::exit(1);
    }
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

// One direction's bytes in flight.
struct Pipe {
    std::vector<char> buf = std::vector<char>(256 * 1024);
    std::size_t begin = 0, end = 0;
    bool eof = false;
    [[nodiscard]] bool empty() const { return begin == end; }
    [[nodiscard]] bool full() const { return end == buf.size(); }
    void compact() {
        if (begin == end) begin = end = 0;
    }
};

// Both ends are "byte streams" with read/write/wait for polling.
struct End {
    virtual ~End() = default;
    virtual ssize_t read(void* b, std::size_t n) = 0;
    virtual ssize_t write(const void* b, std::size_t n) = 0;
    virtual pollfd want(short events) = 0;
    virtual void shut() = 0;
};

struct TcpEnd final : End {
    int fd;
    explicit TcpEnd(int f) : fd(f) {}
    ssize_t read(void* b, std::size_t n) override { return ::recv(fd, b, n, MSG_DONTWAIT); }
    ssize_t write(const void* b, std::size_t n) override { return ::send(fd, b, n, MSG_DONTWAIT | MSG_NOSIGNAL); }
    pollfd want(short events) override { return {fd, events, 0}; }
    void shut() override { ::shutdown(fd, SHUT_WR); }
};

struct RdmaEnd final : End {
    transport::Connection& c;
    explicit RdmaEnd(transport::Connection& conn) : c(conn) {}
    ssize_t read(void* b, std::size_t n) override { return c.read(b, n); }
    ssize_t write(const void* b, std::size_t n) override { return c.write(b, n); }
    pollfd want(short events) override {
        c.set_interest(events);
        return {c.fd(), POLLIN, 0};
    }
    void shut() override { c.shutdown(SHUT_WR); }
};

// Moves what it can from `from` into `p` and from `p` into `to`. False on a
// hard error.
bool pump(End& from, Pipe& p, End& to) {
    while (!p.eof && !p.full()) {
        const ssize_t n = from.read(p.buf.data() + p.end, p.buf.size() - p.end);
        if (n > 0) p.end += static_cast<std::size_t>(n);
        else if (n == 0) p.eof = true;
        else if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        else return false;
    }
    while (!p.empty()) {
        const ssize_t n = to.write(p.buf.data() + p.begin, p.end - p.begin);
        if (n > 0) p.begin += static_cast<std::size_t>(n);
        else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        else return false;
    }
    p.compact();
    return true;
}

void relay(End& client, End& server, const char* prefix, std::size_t prefix_len) {
    Pipe up, down;  // client -> server, server -> client
    std::memcpy(up.buf.data(), prefix, prefix_len);
    up.end = prefix_len;
    bool up_shut = false, down_shut = false;
    for (;;) {
        if (!pump(client, up, server) || !pump(server, down, client)) return;
        if (up.eof && up.empty() && !up_shut) server.shut(), up_shut = true;
        if (down.eof && down.empty() && !down_shut) client.shut(), down_shut = true;
        if (up_shut && down_shut) return;
        const short cev = static_cast<short>((up.eof || up.full() ? 0 : POLLIN) | (down.empty() ? 0 : POLLOUT));
        const short sev = static_cast<short>((down.eof || down.full() ? 0 : POLLIN) | (up.empty() ? 0 : POLLOUT));
        pollfd fds[2] = {client.want(cev), server.want(sev)};
        if (poll(fds, 2, 1000) < 0 && errno != EINTR) return;
    }
}

void serve(int tcp, int pg_port) {
    char first[8];
    std::size_t got = 0;
    while (got < sizeof first) {
        const ssize_t n = ::recv(tcp, first + got, sizeof first - got, 0);
        if (n <= 0) return;
        got += static_cast<std::size_t>(n);
        auto d = protocol::classify_first_packet({reinterpret_cast<std::uint8_t*>(first), got});
        if (d.is_ok() && d.value == protocol::FirstPacket::Other) break;
    }
    auto d = protocol::classify_first_packet({reinterpret_cast<std::uint8_t*>(first), got});
    TcpEnd pg(connect_pg(pg_port));
    if (!(d.is_ok() && d.value == protocol::FirstPacket::Upgrade)) {
        log_line("tcp");
        fcntl(tcp, F_SETFL, O_NONBLOCK);
        TcpEnd client(tcp);
        relay(client, pg, first, got);
        return;
    }
    transport::UpgradeResult r = transport::upgrade_server(tcp, transport::Settings{});
    if (r.outcome != transport::UpgradeOutcome::Rdma) {
        log_line(std::string("declined ") + transport::to_string(r.outcome) + ": " + r.error.message);
        fcntl(tcp, F_SETFL, O_NONBLOCK);
        TcpEnd client(tcp);
        relay(client, pg, nullptr, 0);
        return;
    }
    log_line("rdma");
    RdmaEnd client(*r.connection);
    relay(client, pg, nullptr, 0);
    r.connection->close();
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: stand_in_backend LISTEN_IP LISTEN_PORT PG_PORT LOG_FILE\n");
        return 2;
    }
    g_log = argv[4];
    signal(SIGCHLD, SIG_IGN);  // children reaped by the kernel
    const int ls = socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(std::atoi(argv[2])));
    if (inet_pton(AF_INET, argv[1], &a.sin_addr) != 1 || bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        listen(ls, 128) != 0) {
        std::perror("stand_in_backend: listen");
        return 1;
    }
    std::printf("ready\n");
    std::fflush(stdout);
    for (;;) {
        const int c = accept(ls, nullptr, nullptr);
        if (c < 0) continue;
        if (fork() == 0) {
            close(ls);
            serve(c, std::atoi(argv[3]));
            _exit(0);
        }
        close(c);
    }
}
