// The upgrade handshake: how a PostgreSQL session on a TCP connection asks to
// move onto RDMA, before SSLRequest or the startup packet.
//
// Request, client -> server, the very first packet on the connection; shaped
// like SSLRequest so a server without pg_rdma parses it as a startup packet:
//   0  i32  length = 8
//   4  i32  code   = kUpgradeRequestCode (0x52444D41, "RDMA")
// The code's major half (0x5244) is far from the 1234.x codes PostgreSQL uses
// for CancelRequest/SSLRequest/GSSENCRequest and from protocol versions 2 and
// 3, so an unpatched server answers with an ErrorResponse
// ("unsupported frontend protocol") and closes the connection.
//
// Reply, server -> client, one of:
//   'R' accept: the backend has an RDMA endpoint waiting for this session
//      0  u8   'R'
//      1  u8   handshake version (kUpgradeVersion)
//      2  u8   address family: 4 (IPv4) or 6 (IPv6)
//      3  u8   reserved, 0
//      4  u16  port of the backend's rdma_cm listener, not 0
//      6  u16  the server's setup budget, in units of kSetupBudgetUnitMs:
//              how long it waits for this client's RDMA connection from the
//              reply on (pg_rdma.connect_timeout), rounded down and capped
//              at 65535; 0 = not said. A client never waits longer than
//              this, so it gives up no later than the server does and both
//              fall back together
//      8  16B  address; IPv4 uses bytes 8..11, bytes 12..23 are then 0
//     24  32B  nonce (random, from RAND_bytes): the client presents it when
//              connecting, so only this TCP peer can claim the endpoint
//     56       total length (kUpgradeAcceptSize)
//   'N' decline, one byte: pg_rdma is there but RDMA is not possible for this
//       session (no device, memlock limit, ...); the session continues on this
//       TCP connection with the client's next packet, as after SSLRequest 'N'
//   'E' an ErrorResponse: the server does not know the request (no pg_rdma);
//       it closes the connection, the client must reconnect to stay on TCP
//
// Connect private data, active side -> passive side in rdma_connect():
//   0  u32  magic = kConnectMagic ("PGRC")
//   4  u8   handshake version
//   5  3B   reserved, 0
//   8  32B  nonce from the 'R' reply
//  40       total (within the 56 bytes rdma_cm allows for RC)
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "protocol/decode_result.hpp"

namespace pg_rdma::protocol {

inline constexpr std::uint32_t kUpgradeRequestLength = 8;          // bytes
inline constexpr std::uint32_t kUpgradeRequestCode = 0x52444D41u;  // "RDMA"
inline constexpr std::uint8_t kUpgradeVersion = 1;
inline constexpr std::size_t kNonceSize = 32;                      // bytes
inline constexpr std::size_t kUpgradeAcceptSize = 56;              // bytes
inline constexpr std::uint32_t kConnectMagic = 0x50475243u;        // "PGRC"
inline constexpr std::size_t kConnectPrivateDataSize = 40;         // bytes
inline constexpr std::uint32_t kSetupBudgetUnitMs = 100;           // ms per unit of the reply's budget

inline constexpr std::uint8_t kReplyAccept = 'R';
inline constexpr std::uint8_t kReplyDecline = 'N';
inline constexpr std::uint8_t kReplyError = 'E';

using Nonce = std::array<std::uint8_t, kNonceSize>;
using UpgradeRequestBytes = std::array<std::uint8_t, kUpgradeRequestLength>;
using UpgradeAcceptBytes = std::array<std::uint8_t, kUpgradeAcceptSize>;
using ConnectPrivateDataBytes = std::array<std::uint8_t, kConnectPrivateDataSize>;

// --- request ---------------------------------------------------------------
UpgradeRequestBytes encode_upgrade_request();

enum class FirstPacket { Other, Upgrade, Probe };
// Server side, on the session's first bytes: is this our request (or the
// probe's, probe.hpp)? Any prefix
// that could still become it is NeedMore; anything else is Other (pass it to
// PostgreSQL untouched: a startup packet, SSLRequest, CancelRequest...).
// Never Error: a first packet that is not ours is PostgreSQL's to judge.
Decoded<FirstPacket> classify_first_packet(std::span<const std::uint8_t> bytes);

// PostgreSQL's CancelRequest (libpq/pqcomm.h): length, code 1234.5678, the
// backend's pid, then its key: 4 bytes up to protocol 3.1, up to 256 bytes
// from 3.2 (PostgreSQL 18). Not a session: the server gives it no row.
inline constexpr std::uint32_t kCancelRequestCode = (1234u << 16) | 5678u;
inline constexpr std::uint32_t kCancelRequestMinLength = 16;       // bytes: a 4-byte key
inline constexpr std::uint32_t kCancelRequestMaxLength = 12 + 256;  // bytes: a 256-byte key (3.2)
// Whether the first 8 bytes of a session (fewer: false) are a CancelRequest's.
bool is_cancel_request(std::span<const std::uint8_t> bytes);
// A direct-SSL first packet (PostgreSQL 17's sslnegotiation=direct) is a
// TLS ClientHello: its first byte (22, a handshake record) can never start
// the request, so it is Other at once and PostgreSQL gets it untouched.
inline constexpr std::uint8_t kTlsHandshakeRecord = 0x16;

// --- reply -----------------------------------------------------------------
struct RdmaEndpoint {
    std::uint8_t family = 4;                  // 4 or 6
    std::array<std::uint8_t, 16> address{};   // IPv4 in the first 4 bytes
    std::uint16_t port = 0;
    Nonce nonce{};
    std::uint16_t setup_budget = 0;           // units of kSetupBudgetUnitMs; 0 = not said
    bool operator==(const RdmaEndpoint&) const = default;
};

enum class ReplyKind { Accept, Decline, ServerLacksRdma };
struct UpgradeReply {
    ReplyKind kind = ReplyKind::Decline;
    RdmaEndpoint endpoint{};                  // meaningful for Accept only
    bool operator==(const UpgradeReply&) const = default;
};

UpgradeAcceptBytes encode_upgrade_accept(const RdmaEndpoint& endpoint);
// Client side. 'E' is Ok(ServerLacksRdma) with consumed = 0: the bytes belong
// to the ErrorResponse, which the caller may read for its message.
Decoded<UpgradeReply> decode_upgrade_reply(std::span<const std::uint8_t> bytes);

// A setup budget in milliseconds as the reply carries it (rounded down,
// at least one unit for any positive budget, capped), and back.
std::uint16_t encode_setup_budget(std::uint64_t budget_ms);
std::uint64_t setup_budget_ms(std::uint16_t units);

// --- rdma_connect private data --------------------------------------------
ConnectPrivateDataBytes encode_connect_private_data(const Nonce& nonce);
// Accepts a longer buffer (transports may pad private data) but checks that
// the padding is zero.
Decoded<Nonce> decode_connect_private_data(std::span<const std::uint8_t> bytes);

// Fresh random nonce from OpenSSL's RAND_bytes; false if the RNG failed.
bool generate_nonce(Nonce& out);

}  // namespace pg_rdma::protocol
