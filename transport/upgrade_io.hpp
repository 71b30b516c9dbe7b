// What both ends of the upgrade exchange share: moving a known number of
// bytes over the TCP socket without waiting, the TCP connection's
// addresses, the fallback outcomes, and the blocking form's loop. Internal
// to tcp_upgrade.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "protocol/upgrade.hpp"
#include "transport/tcp_upgrade.hpp"

namespace pg_rdma::transport {

enum class IoStatus { Done, Wait, Failed };

// Sends bytes[done..] as far as the socket takes them now; advances `done`.
// Wait: call again once the socket is writable.
IoStatus send_some(int fd, const TcpIo& io, std::span<const std::uint8_t> bytes, std::size_t& done, Error& err);
// Receives into bytes[done..] what has arrived; advances `done`. Wait: call
// again once readable. A peer that closed first is ECONNRESET.
IoStatus recv_some(int fd, const TcpIo& io, std::span<std::uint8_t> bytes, std::size_t& done, Error& err);

// The TCP connection's own addresses. `local` is the form an RDMA endpoint
// binds: port 0, and an IPv4 peer on a dual-stack socket (::ffff:a.b.c.d)
// as plain IPv4. Fails with EAFNOSUPPORT for anything but IP.
bool tcp_addresses(int fd, sockaddr_storage& local, sockaddr_storage& peer, Error& err);

// The reply's endpoint as a socket address, and back.
sockaddr_storage endpoint_address(const protocol::RdmaEndpoint& ep);
protocol::RdmaEndpoint describe_endpoint(const sockaddr_storage& bound, const protocol::Nonce& nonce);

[[nodiscard]] inline const sockaddr* as_sockaddr(const sockaddr_storage& s) {
    return reinterpret_cast<const sockaddr*>(&s);
}

// The blocking forms (upgrade_client, upgrade_server): the steps, waiting
// between them. Each side's lives in its own file, so that a program
// linking only the client's side (libpq_rdma.so) does not take in the
// server's, and with it libcrypto.
template <class Upgrade>
UpgradeResult run_to_end(Upgrade& upgrade) noexcept {
    while (upgrade.step() == StepStatus::InProgress) {
        Error err;
        if (!wait_for(upgrade.want(), upgrade.deadline(), err)) {
            UpgradeResult failed;
            failed.error = std::move(err);
            return failed;
        }
    }
    return upgrade.take_result();
}

}  // namespace pg_rdma::transport
