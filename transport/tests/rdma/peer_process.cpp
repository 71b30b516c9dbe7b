#include <algorithm>
#include "peer_process.hpp"

#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "transport/cm_events.hpp"

namespace pg_rdma::test {

sockaddr_in rdma_address(std::uint16_t port) {
    const char* ip = std::getenv("RXE_IP");
    if (ip == nullptr) throw std::runtime_error("RXE_IP is not set: run this test in the Soft-RoCE guest");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) throw std::runtime_error("RXE_IP is not an IPv4 address");
    return a;
}

protocol::Nonce test_nonce() {
    protocol::Nonce n{};
    for (std::size_t i = 0; i < n.size(); ++i) n[i] = static_cast<std::uint8_t>(i * 7 + 1);
    return n;
}

bool resolve_route_to(std::uint16_t port, ResolvedId& out, std::string& why) {
    constexpr int kResolveMs = 5000;
    const auto deadline = transport::SetupClock::now() + 10s;
    transport::Error err;
    out.channel = transport::make_cm_channel(transport::SetupSide::Connecting, err);
    rdma_cm_id* raw = nullptr;
    if (!out.channel || rdma_create_id(out.channel.get(), &raw, nullptr, RDMA_PS_TCP) != 0)
        return why = "rdma_create_id", false;
    out.id.reset(raw);
    sockaddr_in dst = rdma_address(port);
    if (rdma_resolve_addr(out.id.get(), nullptr, reinterpret_cast<sockaddr*>(&dst), kResolveMs) != 0 ||
        !transport::expect_cm_event(out.channel.get(), RDMA_CM_EVENT_ADDR_RESOLVED, deadline, "addr", err) ||
        rdma_resolve_route(out.id.get(), kResolveMs) != 0 ||
        !transport::expect_cm_event(out.channel.get(), RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, "route", err))
        return why = err.message, false;
    return true;
}

PeerProcess::PeerProcess(std::function<int()> body) {
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
        int rc = 99;
        try {
            rc = body();
        } catch (...) {
            rc = 98;
        }
        std::exit(rc);
    }
}

PeerProcess::~PeerProcess() {
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
    }
}

int PeerProcess::wait() {
    int status = 0;
    if (waitpid(pid_, &status, 0) != pid_) return -1;
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void PeerProcess::kill(int signal) { ::kill(pid_, signal); }

Pipe::Pipe() {
    if (pipe(fds_) != 0) throw std::runtime_error("pipe failed");
}
Pipe::~Pipe() {
    ::close(fds_[0]);
    ::close(fds_[1]);
}
void Pipe::send_u32(std::uint32_t v) {
    if (::write(fds_[1], &v, sizeof v) != sizeof v) throw std::runtime_error("pipe write failed");
}
std::uint32_t Pipe::recv_u32() {
    std::uint32_t v = 0;
    if (::read(fds_[0], &v, sizeof v) != sizeof v) throw std::runtime_error("pipe read failed");
    return v;
}

namespace {

using Clock = std::chrono::steady_clock;

int ms_left(Clock::time_point deadline) {
    return static_cast<int>(
        std::max<std::int64_t>(0, std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count()));
}

// The waits of an embedding: the connection's own wait primitive, asked
// for exactly the readiness the caller needs. False once `deadline` passed.
bool wait_for(Connection& conn, short events, Clock::time_point deadline) {
    const int left = ms_left(deadline);
    if (left <= 0) return false;
    return conn.wait(events, left) >= 0 || errno == EINTR;
}

// The wait of a program that polls fd() itself (the reproduction).
bool wait_readable(Connection& conn, Clock::time_point deadline) {
    const int left = ms_left(deadline);
    if (left <= 0) return false;
    pollfd p{conn.fd(), POLLIN, 0};
    return poll(&p, 1, left) >= 0;
}

}  // namespace

bool write_all(Connection& conn, const std::uint8_t* data, std::size_t len, std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    while (len > 0) {
        const ssize_t n = conn.write(data, len);
        if (n > 0) {
            data += n;
            len -= static_cast<std::size_t>(n);
        } else if (errno != EAGAIN || !wait_for(conn, POLLOUT, deadline)) {
            if (errno == EAGAIN) errno = ETIMEDOUT;
            return false;
        }
    }
    return true;
}

bool read_exact(Connection& conn, std::uint8_t* data, std::size_t len, std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    while (len > 0) {
        const ssize_t n = conn.read(data, len);
        if (n > 0) {
            data += n;
            len -= static_cast<std::size_t>(n);
        } else if (n == 0) {
            errno = ECONNRESET;  // EOF before the expected bytes
            return false;
        } else if (errno != EAGAIN || !wait_for(conn, POLLIN, deadline)) {
            if (errno == EAGAIN) errno = ETIMEDOUT;
            return false;
        }
    }
    return true;
}

bool read_eof(Connection& conn, std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    std::uint8_t byte = 0;
    for (;;) {
        const ssize_t n = conn.read(&byte, 1);
        if (n == 0) return true;
        if (n > 0 || errno != EAGAIN || !wait_for(conn, POLLIN, deadline)) return false;
    }
}

int wait_for_error(Connection& conn, std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    std::uint8_t byte = 0;
    for (;;) {
        const ssize_t n = conn.read(&byte, 1);
        if (n >= 0) return 0;
        if (errno != EAGAIN) return errno;
        if (!wait_readable(conn, deadline)) return 0;
    }
}

bool write_pattern(Connection& conn, std::size_t len, std::uint32_t seed) {
    std::vector<std::uint8_t> data(len);
    fill_pattern(data.data(), data.size(), seed);
    return write_all(conn, data.data(), data.size());
}

bool read_pattern(Connection& conn, std::size_t len, std::uint32_t seed) {
    std::vector<std::uint8_t> data(len);
    return read_exact(conn, data.data(), data.size()) && check_pattern(data.data(), data.size(), seed);
}

void fill_pattern(std::uint8_t* data, std::size_t len, std::uint32_t seed, std::uint64_t offset) {
    for (std::size_t i = 0; i < len; ++i) {
        const std::uint64_t x = (offset + i) * 0x9E3779B97F4A7C15ull + seed;
        data[i] = static_cast<std::uint8_t>(x >> 56);
    }
}

bool check_pattern(const std::uint8_t* data, std::size_t len, std::uint32_t seed, std::uint64_t offset) {
    for (std::size_t i = 0; i < len; ++i) {
        const std::uint64_t x = (offset + i) * 0x9E3779B97F4A7C15ull + seed;
        if (data[i] != static_cast<std::uint8_t>(x >> 56)) return false;
    }
    return true;
}

Rendezvous::Rendezvous(Pipe& port_pipe, const Settings& settings) {
    const sockaddr_in addr = rdma_address(0);
    transport::Error err;
    listener_ = transport::Listener::create(reinterpret_cast<const sockaddr*>(&addr), settings, err);
    if (!listener_) throw std::runtime_error("Listener::create: " + err.message);
    const sockaddr_storage bound = listener_->local_address();
    port_pipe.send_u32(ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port));
}

std::unique_ptr<Connection> Rendezvous::accept() {
    transport::Error err;
    auto conn = listener_->accept(test_nonce(), nullptr, err);
    if (!conn) throw std::runtime_error("Listener::accept: " + err.message);
    return conn;
}

std::unique_ptr<Connection> connect_to_parent(Pipe& port_pipe, const Settings& settings, std::string& error) {
    return connect_to_parent(static_cast<std::uint16_t>(port_pipe.recv_u32()), settings, error);
}

std::unique_ptr<Connection> connect_to_parent(std::uint16_t port, const Settings& settings, std::string& error) {
    const sockaddr_in addr = rdma_address(port);
    transport::Error err;
    auto conn = transport::connect(reinterpret_cast<const sockaddr*>(&addr), test_nonce(), settings, err);
    if (!conn) error = err.message;
    return conn;
}

}  // namespace pg_rdma::test

namespace pg_rdma::test {

bool exchange(Connection& conn, std::uint64_t send_len, std::uint32_t send_seed, std::uint64_t recv_len,
              std::uint32_t recv_seed, std::string& why, std::chrono::seconds limit) {
    constexpr std::size_t kChunk = 256 * 1024;  // bytes per write/read call
    std::vector<std::uint8_t> out(kChunk), in(kChunk);
    std::uint64_t sent = 0, received = 0;
    const auto deadline = Clock::now() + limit;
    while (sent < send_len || received < recv_len) {
        bool moved = false;
        if (sent < send_len) {
            const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, send_len - sent));
            fill_pattern(out.data(), n, send_seed, sent);
            const ssize_t w = conn.write(out.data(), n);
            if (w > 0) {
                sent += static_cast<std::uint64_t>(w);
                moved = true;
            } else if (errno != EAGAIN) {
                why = std::string("write: ") + std::strerror(errno);
                return false;
            }
        }
        if (received < recv_len) {
            const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, recv_len - received));
            const ssize_t r = conn.read(in.data(), n);
            if (r > 0) {
                if (!check_pattern(in.data(), static_cast<std::size_t>(r), recv_seed, received)) {
                    why = "received bytes differ from what the peer sent at offset " + std::to_string(received);
                    return false;
                }
                received += static_cast<std::uint64_t>(r);
                moved = true;
            } else if (r == 0) {
                why = "EOF after " + std::to_string(received) + " bytes";
                return false;
            } else if (errno != EAGAIN) {
                why = std::string("read: ") + std::strerror(errno);
                return false;
            }
        }
        short want = 0;
        if (sent < send_len) want |= POLLOUT;
        if (received < recv_len) want |= POLLIN;
        if (!moved && !wait_for(conn, want, deadline)) {
            why = "timed out with " + std::to_string(sent) + " sent, " + std::to_string(received) + " received";
            return false;
        }
    }
    return true;
}

}  // namespace pg_rdma::test
