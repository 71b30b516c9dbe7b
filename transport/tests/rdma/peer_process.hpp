// Test scaffolding for RDMA tests: a forked peer process and blocking
// helpers over the non-blocking Connection.
//
// Fork safety is part of what is tested: every fork happens before this
// process creates any verbs resource for the connection concerned, and the
// child creates its own.
#pragma once

#include <netinet/in.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport/connection.hpp"
#include "transport/rdma_setup.hpp"
#include "transport/verbs_raii.hpp"

namespace pg_rdma::test {

using namespace std::chrono_literals;
using transport::Connection;
using transport::Settings;

// The guest's RDMA address (RXE_IP), port 0. Fails the test if unset.
sockaddr_in rdma_address(std::uint16_t port = 0);

// A nonce both sides of a test agree on.
protocol::Nonce test_nonce();

// An id on its own event channel, its address and route to the guest's
// RDMA address at `port` resolved: what Endpoint::create takes on the
// active side. No peer needs to listen. On failure, false and `why`.
struct ResolvedId {
    transport::CmChannelPtr channel;
    transport::CmIdPtr id;
};
bool resolve_route_to(std::uint16_t port, ResolvedId& out, std::string& why);

class PeerProcess {
public:
    // Forks; the child runs `body` and exits with its result (std::exit, so
    // exit handlers run as in a real program).
    explicit PeerProcess(std::function<int()> body);
    ~PeerProcess();
    PeerProcess(const PeerProcess&) = delete;
    PeerProcess& operator=(const PeerProcess&) = delete;

    // Waits for the child; returns its exit status, or 128 + signal.
    int wait();
    void kill(int signal);
    [[nodiscard]] bool running() const { return pid_ > 0; }
    [[nodiscard]] pid_t pid() const { return pid_; }

private:
    pid_t pid_ = -1;
};

// A one-way pipe for small messages between the test and its peer.
class Pipe {
public:
    Pipe();
    ~Pipe();
    void send_u32(std::uint32_t v);
    std::uint32_t recv_u32();

private:
    int fds_[2] = {-1, -1};
};

// Blocking helpers: wait on conn.fd() for POLLIN whenever a call says EAGAIN.
// All return false (and leave errno) on failure or when `limit` passes.
bool write_all(Connection& conn, const std::uint8_t* data, std::size_t len, std::chrono::seconds limit = 120s);
bool read_exact(Connection& conn, std::uint8_t* data, std::size_t len, std::chrono::seconds limit = 120s);
// True when the next read reports EOF (0) within `limit`.
bool read_eof(Connection& conn, std::chrono::seconds limit = 30s);
// Waits until read() fails; returns its errno (0 if it timed out or got data/EOF).
int wait_for_error(Connection& conn, std::chrono::seconds limit);

// write_all / read_exact of `len` pattern bytes (fill_pattern), checked.
bool write_pattern(Connection& conn, std::size_t len, std::uint32_t seed);
bool read_pattern(Connection& conn, std::size_t len, std::uint32_t seed);

// Deterministic bytes: the same (seed, offset) always gives the same byte.
void fill_pattern(std::uint8_t* data, std::size_t len, std::uint32_t seed, std::uint64_t offset = 0);
bool check_pattern(const std::uint8_t* data, std::size_t len, std::uint32_t seed, std::uint64_t offset = 0);

// The test's side of a rendezvous with a forked peer: listens on the guest
// address (port 0) and tells the peer the port over `port_pipe`. Throws,
// with the transport's message, when listening or accepting fails.
class Rendezvous {
public:
    Rendezvous(Pipe& port_pipe, const Settings& settings);
    std::unique_ptr<Connection> accept();
    transport::Listener& listener() { return *listener_; }

private:
    std::unique_ptr<transport::Listener> listener_;
};

// The peer's side: connects to the port the test sent. nullptr with `error`.
std::unique_ptr<Connection> connect_to_parent(std::uint16_t port, const Settings& settings, std::string& error);
// Reads the port from `port_pipe` first; for a peer that connects once.
std::unique_ptr<Connection> connect_to_parent(Pipe& port_pipe, const Settings& settings, std::string& error);

}  // namespace pg_rdma::test

namespace pg_rdma::test {
// Sends `send_len` pattern bytes (send_seed) while receiving and checking
// `recv_len` pattern bytes (recv_seed), both at once, as a full-duplex
// application would. False on error, mismatch or timeout; `why` says which.
bool exchange(Connection& conn, std::uint64_t send_len, std::uint32_t send_seed, std::uint64_t recv_len,
              std::uint32_t recv_seed, std::string& why, std::chrono::seconds limit = 240s);
}  // namespace pg_rdma::test
