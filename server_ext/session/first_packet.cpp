#include "server_ext/session/first_packet.hpp"

#include <poll.h>
#include <sys/types.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>

#include "protocol/upgrade.hpp"
#include "server_ext/session/real_calls.hpp"

namespace pg_rdma::server {
namespace {

// How long a prefix of our request may wait for its remaining bytes in one
// call. The backend's authentication_timeout bounds the whole wait.
constexpr int kPrefixPatienceMs = 200;

}  // namespace

FirstPacket take_first_packet(int fd) noexcept {
    const RealCalls& real = real_calls();
    protocol::UpgradeRequestBytes bytes{};
    for (int round = 0; round < 2; ++round) {
        const ssize_t n = real.recv(fd, bytes.data(), bytes.size(), MSG_PEEK | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return FirstPacket::NotYet;
        if (n == 0) return FirstPacket::Empty;  // PostgreSQL reads the EOF and says nothing
        if (n <= 0) return FirstPacket::Other;  // an error: PostgreSQL reads it and reports
        const auto decoded = protocol::classify_first_packet(std::span(bytes).first(static_cast<std::size_t>(n)));
        if (decoded.status == protocol::DecodeStatus::Ok) {
            if (decoded.value == protocol::FirstPacket::Other)
                return protocol::is_cancel_request(std::span(bytes).first(static_cast<std::size_t>(n)))
                           ? FirstPacket::Cancel
                           : FirstPacket::Other;
            // Consume exactly our 8 bytes: what follows is the session's.
            const ssize_t taken = real.recv(fd, bytes.data(), bytes.size(), MSG_DONTWAIT);
            if (taken != static_cast<ssize_t>(bytes.size())) return FirstPacket::Other;
            return decoded.value == protocol::FirstPacket::Probe ? FirstPacket::Probe : FirstPacket::Upgrade;
        }
        if (decoded.status != protocol::DecodeStatus::NeedMore) return FirstPacket::Other;
        if (round == 0) {
            // Wait for more: poll wakes at once while the peeked bytes are
            // there, so sleep first, then check.
            pollfd p{fd, POLLIN | POLLRDHUP, 0};
            const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kPrefixPatienceMs);
            while (std::chrono::steady_clock::now() < until) {
                struct timespec pause{0, 5'000'000};  // 5 ms
                nanosleep(&pause, nullptr);
                if (real.recv(fd, bytes.data(), bytes.size(), MSG_PEEK | MSG_DONTWAIT) >= static_cast<ssize_t>(bytes.size()))
                    break;
                // A client that half-closed after a prefix sends nothing more:
                // PostgreSQL reads the prefix and reports the short packet.
                if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0)
                    return FirstPacket::Other;
            }
        }
    }
    return FirstPacket::NotYet;
}

bool send_decline(int fd) noexcept {
    const std::uint8_t reply = protocol::kReplyDecline;
    return real_calls().send(fd, &reply, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1;
}

}  // namespace pg_rdma::server
