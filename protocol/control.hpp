// Control messages exchanged over an established RC queue pair.
//
// Every control message is exactly kControlMessageSize (32) bytes, sent with
// IBV_WR_SEND into a 32-byte receive buffer; all integers are big-endian;
// every byte not named below is reserved and must be zero (decoders reject
// anything else, so later versions can give those bytes a meaning safely).
//
// Common header
//   0  u16  opcode           (Opcode below)
//   2  u8   version          format version; kMinProtocolVersion..kMaxProtocolVersion
//   3  u8   flags            reserved, 0
//
// GetServerFeature (0), active side -> passive side, first message: the offer
// SetClientFeature (1), passive side -> active side, the answer
//   4  u8   min_version      | SetClientFeature: chosen version
//   5  u8   max_version      | SetClientFeature: NegotiationStatus
//   6  u16  credits          receive work requests the sender has posted for
//                            its peer: how many messages the peer may have in
//                            flight toward it before the first CreditUpdate
//   8  u64  features         offered bits | SetClientFeature: agreed bits
//  16  u32  rx_buffer_size   bytes of the sender's RX ring (multiple of 4 KiB)
//  20  u32  keepalive_interval_ms  | agreed value in SetClientFeature
//  24  u32  keepalive_timeout_ms   | agreed value in SetClientFeature
//                            in an offer or Ok agreement always in range with
//                            timeout >= 2 x interval, even without
//                            feature::kKeepalive; in an agreement without that
//                            bit they mean nothing
//  28  u32  reserved
//
// Keepalive (2): header only. Proves the sender is alive; any message does.
//
// RegisterXferMemory (3): the sender's RX ring, remotely writable by the peer
//   4  u32  rkey
//   8  u64  addr             virtual address of the ring's first byte
//  16  u32  length           must equal the rx_buffer_size announced earlier
//
// CreditUpdate (4): what the sender's application has consumed; both fields
// are cumulative since the connection started, so a lost or late update is
// simply superseded by the next one
//   4  u32  credits_granted  receive WRs posted for the peer, in total (mod 2^32),
//                            the initial `credits` included
//   8  u64  rx_consumed      bytes of the sender's RX ring consumed, in total
//
// Close (5): orderly end of the sender's byte stream (like a TCP FIN)
//   8  u64  bytes_sent       total bytes the sender wrote; the receiver
//                            reports EOF only once it has delivered them all
//  16  u64  rx_consumed      bytes of the peer's stream the sender's
//                            application had consumed, in total (as in
//                            CreditUpdate): tells the peer which of its
//                            last bytes arrived, even if their completions
//                            never come because the sender disconnects next
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <variant>

#include "protocol/decode_result.hpp"

namespace pg_rdma::protocol {

inline constexpr std::size_t kControlMessageSize = 32;  // bytes, every opcode

inline constexpr std::uint8_t kMinProtocolVersion = 1;
inline constexpr std::uint8_t kMaxProtocolVersion = 1;

// Limits every decoder enforces on values read from the peer.
inline constexpr std::uint32_t kRxBufferAlignment = 4096;               // bytes
inline constexpr std::uint32_t kMinRxBufferSize = 4096;                 // bytes
inline constexpr std::uint32_t kMaxRxBufferSize = 64u * 1024 * 1024;    // bytes
inline constexpr std::uint16_t kMinCredits = 4;                         // receive WRs
inline constexpr std::uint16_t kMaxCredits = 4096;                      // receive WRs
inline constexpr std::uint32_t kMinKeepaliveIntervalMs = 10;            // ms
inline constexpr std::uint32_t kMaxKeepaliveIntervalMs = 3'600'000;     // ms (1 h)
inline constexpr std::uint32_t kMaxKeepaliveTimeoutMs = 86'400'000;     // ms (24 h)

enum class Opcode : std::uint16_t {
    GetServerFeature = 0,
    SetClientFeature = 1,
    Keepalive = 2,
    RegisterXferMemory = 3,
    CreditUpdate = 4,
    Close = 5,
};

// Feature bits. A peer ignores bits it does not know; kRequiredFeatures are
// those this build cannot work without.
namespace feature {
// The peer sends Keepalive when idle and declares the connection dead after
// the agreed timeout of silence. Only when this bit is agreed: otherwise the
// agreement's keepalive fields are still valid numbers but mean nothing.
inline constexpr std::uint64_t kKeepalive = 1ull << 0;
// Close carries the byte count, so EOF is reported only after every byte.
inline constexpr std::uint64_t kOrderlyClose = 1ull << 1;
// The RX ring is re-announced continuously by CreditUpdate.rx_consumed.
inline constexpr std::uint64_t kRingCredits = 1ull << 2;
// Every message but CreditUpdate carries the Solicited Event bit
// (IBV_SEND_SOLICITED), so a receiver that waits only to read may ask for
// solicited events alone and is not woken by the peer's credit grants or
// by its own send completions.
inline constexpr std::uint64_t kSolicitedEvents = 1ull << 3;
// When the queue pair fails mid-session, both ends move the stream onto the
// TCP connection they still hold (protocol/failover.hpp) instead of ending it.
inline constexpr std::uint64_t kTcpFailover = 1ull << 4;
// A message's bytes may run past the end of the receiver's RX ring and on
// from its start: the sender writes them as a plain RDMA WRITE up to the
// end followed by a WRITE WITH IMM whose immediate counts both, and the
// receiver, completing only on the latter (RC places them in order), sees
// one message. Without it a write stops at the ring's end, and a stream
// whose offsets are off the ring's grid pays an extra message, completion
// and wakeup at the receiver per ring's worth of bytes.
inline constexpr std::uint64_t kRingWrap = 1ull << 5;
}  // namespace feature
inline constexpr std::uint64_t kSupportedFeatures =
    feature::kKeepalive | feature::kOrderlyClose | feature::kRingCredits | feature::kSolicitedEvents |
    feature::kTcpFailover | feature::kRingWrap;
inline constexpr std::uint64_t kRequiredFeatures = feature::kOrderlyClose | feature::kRingCredits;

enum class NegotiationStatus : std::uint8_t {
    Ok = 0,
    NoCommonVersion = 1,
    MissingRequiredFeature = 2,
    BadParameters = 3,
};
std::string_view to_string(NegotiationStatus s);

// GetServerFeature: what one side can do and what it has prepared.
struct FeatureOffer {
    std::uint8_t min_version = kMinProtocolVersion;
    std::uint8_t max_version = kMaxProtocolVersion;
    std::uint16_t credits = 0;
    std::uint64_t features = 0;
    std::uint32_t rx_buffer_size = 0;
    std::uint32_t keepalive_interval_ms = 0;
    std::uint32_t keepalive_timeout_ms = 0;
    bool operator==(const FeatureOffer&) const = default;
};

// SetClientFeature: the passive side's decision plus its own resources.
struct FeatureAgreement {
    std::uint8_t version = 0;
    NegotiationStatus status = NegotiationStatus::Ok;
    std::uint16_t credits = 0;
    std::uint64_t features = 0;
    std::uint32_t rx_buffer_size = 0;
    std::uint32_t keepalive_interval_ms = 0;
    std::uint32_t keepalive_timeout_ms = 0;
    bool operator==(const FeatureAgreement&) const = default;
};

struct Keepalive {
    bool operator==(const Keepalive&) const = default;
};

struct XferMemory {
    std::uint32_t rkey = 0;
    std::uint64_t addr = 0;
    std::uint32_t length = 0;
    bool operator==(const XferMemory&) const = default;
};

struct CreditUpdate {
    std::uint32_t credits_granted = 0;
    std::uint64_t rx_consumed = 0;
    bool operator==(const CreditUpdate&) const = default;
};

struct CloseMessage {
    std::uint64_t bytes_sent = 0;
    std::uint64_t rx_consumed = 0;
    bool operator==(const CloseMessage&) const = default;
};

using ControlMessage =
    std::variant<FeatureOffer, FeatureAgreement, Keepalive, XferMemory, CreditUpdate, CloseMessage>;

using ControlBytes = std::array<std::uint8_t, kControlMessageSize>;

// Encodes with the format version `version` (the negotiated one once known;
// the feature exchange itself always uses kMinProtocolVersion).
ControlBytes encode_control(const ControlMessage& msg, std::uint8_t version = kMinProtocolVersion);

// Decodes one message from the front of `bytes`. Fewer than 32 bytes is
// NeedMore; an unknown opcode, unsupported version, set reserved bit or
// out-of-range field is Error.
Decoded<ControlMessage> decode_control(std::span<const std::uint8_t> bytes);

}  // namespace pg_rdma::protocol
