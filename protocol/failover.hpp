// The failover message: what each end of an RDMA session sends on the TCP
// connection both still hold when the queue pair failed (link down past
// the retry limit, the device removed), so that the session carries on over
// TCP with no byte lost or repeated (transport/stream_failover.cpp).
//
// Each end sends exactly one, after its queue pair is in the error state and
// its completions are taken in, so `received` is final: every byte of the
// peer's stream this end holds (read by its application or still in its RX
// ring). The peer resends its stream from there on TCP. `sent` is how many
// bytes this end's application has written, and `kept_from`, the first byte
// of its own stream it still holds (what no completion released: the peer
// may lack anything from there on). Each end can resume from the other's
// `received` only if that lies in [kept_from, sent]; both ends judge both
// directions with both messages (resumable_pair), so they always reach the
// same verdict. An end that cannot resume at all (it was closing) says so
// with `resumable` false; both ends then end the session with an error.
//
// Layout (32 bytes, big-endian):
//   0  u32 magic 0x50475246 ("PGRF")
//   4  u8  version (1)
//   5  u8  flags: bit 0 resumable; the other bits zero
//   6  u16 reserved, zero
//   8  u64 received
//  16  u64 kept_from
//  24  u64 sent
// Only sent when both ends agreed on feature::kTcpFailover, so a peer that
// does not know this message never sees it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "protocol/decode_result.hpp"

namespace pg_rdma::protocol {

inline constexpr std::size_t kFailoverMessageSize = 32;  // bytes
inline constexpr std::uint32_t kFailoverMagic = 0x50475246u;  // "PGRF"
inline constexpr std::uint8_t kFailoverVersion = 1;

struct FailoverMessage {
    bool resumable = false;
    std::uint64_t received = 0;  // bytes of the peer's stream this end holds
    std::uint64_t kept_from = 0; // the first byte of its own stream this end still holds
    std::uint64_t sent = 0;      // bytes of its own stream this end's application wrote
};

// Whether the session can resume with these two messages, one from each
// end (the same answer whichever end asks): both resumable, and each end
// holds the other's stream from where the other's count ends.
[[nodiscard]] bool resumable_pair(const FailoverMessage& a, const FailoverMessage& b);

using FailoverBytes = std::array<std::uint8_t, kFailoverMessageSize>;

FailoverBytes encode_failover(const FailoverMessage& message);
// NeedMore until 32 bytes are there; an error for anything else than the
// message above (also kept_from > sent).
Decoded<FailoverMessage> decode_failover(std::span<const std::uint8_t> bytes);

}  // namespace pg_rdma::protocol
