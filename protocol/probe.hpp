// The probe: `pgrdma doctor` asking a server "could a session of mine use
// RDMA?" without starting a PostgreSQL session. It is the upgrade handshake
// (upgrade.hpp) under its own request code, with a decline that says why.
//
// Request, client -> server, the very first packet on the connection:
//   0  i32  length = 8
//   4  i32  code   = kProbeRequestCode (0x52444D50, "RDMP")
// A server without pg_rdma (or with one older than the probe) answers as
// it does the upgrade request: an ErrorResponse, then it closes.
//
// Reply, server -> client:
//   'R' as for the upgrade (upgrade.hpp): the client connects over RDMA and
//       the server echoes every byte it receives there, up to
//       kProbeEchoLimit bytes or kProbeTimeLimitMs, then closes both the
//       RDMA connection and the TCP one; no PostgreSQL session starts, and
//       nothing the client sent after its request reaches PostgreSQL
//   'D' decline with its reason:
//      0  u8   'D'
//      1  u8   n: length of the outcome's name (1..kMaxProbeOutcomeLength)
//      2  u16  m: length of the reason (0..kMaxProbeReasonLength)
//      4  n    outcome, as pg_stat_rdma_outcomes names it ("memlock",
//              "not_offered", ...): lower-case letters and '_' only
//    4+n  m    reason, UTF-8, as the server's log would give it
//       then the server closes the connection
//   'E' an ErrorResponse: no pg_rdma there, or one without the probe
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/decode_result.hpp"
#include "protocol/upgrade.hpp"

namespace pg_rdma::protocol {

inline constexpr std::uint32_t kProbeRequestCode = 0x52444D50u;  // "RDMP"
inline constexpr std::uint8_t kReplyProbeDecline = 'D';
inline constexpr std::size_t kProbeDeclineHeaderSize = 4;       // bytes: tag, n, m
inline constexpr std::size_t kMaxProbeOutcomeLength = 32;       // bytes
inline constexpr std::size_t kMaxProbeReasonLength = 1024;      // bytes
inline constexpr std::size_t kMaxProbeDeclineSize =
    kProbeDeclineHeaderSize + kMaxProbeOutcomeLength + kMaxProbeReasonLength;
// What the server echoes at most, and for how long it keeps a probe's
// RDMA connection open: a probe pins what a session pins, so it must not
// outstay one's setup by much.
inline constexpr std::size_t kProbeEchoLimit = 1u << 20;        // bytes
inline constexpr int kProbeTimeLimitMs = 5'000;                 // ms

UpgradeRequestBytes encode_probe_request();

struct ProbeDecline {
    std::string outcome;
    std::string reason;
    bool operator==(const ProbeDecline&) const = default;
};

// An outcome name that is not one (empty, too long, another character) is
// replaced by "unknown"; a reason longer than the limit is cut.
std::vector<std::uint8_t> encode_probe_decline(std::string_view outcome, std::string_view reason);
// Client side, from the 'D' on. NeedMore until the whole reply is there.
Decoded<ProbeDecline> decode_probe_decline(std::span<const std::uint8_t> bytes);

}  // namespace pg_rdma::protocol
