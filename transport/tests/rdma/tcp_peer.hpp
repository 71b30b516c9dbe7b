// Test scaffolding for the upgrade tests: plain TCP on the guest's
// addresses, hand-rolled halves of the exchange, an extra address on the
// rxe netdev, and what a process holds (descriptors, pinned bytes).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "protocol/upgrade.hpp"

namespace pg_rdma::test {

// An IPv4 address (dotted quad) and port.
sockaddr_in ipv4(const char* ip, std::uint16_t port = 0);
std::string ip_of(const sockaddr_in& a);  // "10.99.0.1"

struct TcpListener {
    int fd = -1;
    std::uint16_t port = 0;
    // Listens on RXE_IP, or on `ip`.
    explicit TcpListener(const char* ip = nullptr);
    ~TcpListener();
    TcpListener(const TcpListener&) = delete;
    TcpListener& operator=(const TcpListener&) = delete;
    [[nodiscard]] int accept_one() const;
};

// Connects to RXE_IP:port, from `source_ip` when given; -1 on failure.
int tcp_connect(std::uint16_t port, const char* source_ip = nullptr);
bool read_fully(int fd, void* buf, std::size_t n);
bool send_fully(int fd, const void* buf, std::size_t n);

// Server half by hand: reads the 8-byte request. True if it was ours.
bool read_upgrade_request(int fd);
// Client half by hand: sends the request and reads an 'R' reply.
bool request_and_read_accept(int fd, protocol::UpgradeAcceptBytes& reply);
// An 'R' reply naming `endpoint` (with its port) and `nonce`, and the
// server's setup budget (0: not said).
protocol::UpgradeAcceptBytes accept_reply(const sockaddr_in& endpoint, const protocol::Nonce& nonce,
                                          std::chrono::milliseconds setup_budget = std::chrono::milliseconds{0});

// A second address on the rxe netdev (RXE_NETDEV) for as long as this
// lives, IPv4 (in the guest's /24) or IPv6 (a /64); waits until rxe has a
// GID for it, so rdma_cm can bind it.
class ExtraAddress {
public:
    explicit ExtraAddress(const char* ip);
    ~ExtraAddress();
    ExtraAddress(const ExtraAddress&) = delete;
    ExtraAddress& operator=(const ExtraAddress&) = delete;

private:
    std::string ip_;
};

// What a process holds that an abandoned setup could leak.
struct Held {
    int descriptors = 0;       // entries in /proc/self/fd
    std::size_t pinned = 0;    // transport::pinned_bytes_in_process()
    bool operator==(const Held&) const = default;
};
Held held_now();
std::string to_string(const Held& h);

// The one-time work of a process's first RDMA setup: libibverbs loads its
// provider libraries, librdmacm opens the device, OpenSSL seeds the RNG the
// nonce comes from (together ~100-350 ms in the TCG guest, where every file
// comes over 9p). Not a wait for any peer;
// tests that time setup steps or count descriptors do it first. Returns
// how long it took, in milliseconds.
double warm_up_rdma_libraries();

// Milliseconds between two steady_clock points.
inline double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace pg_rdma::test
