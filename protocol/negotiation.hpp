// Feature negotiation: the pure decision behind GetServerFeature and
// SetClientFeature, kept apart from any I/O so it can be tested exhaustively.
//
// The passive side (server) calls negotiate() with the active side's offer,
// its own offer and its KeepaliveBounds; the active side (client) calls
// check_agreement() on the answer.
//   version    highest version both ranges contain
//   features   intersection of both offers (unknown bits drop out here)
//   keepalive  the server stays in control of its own resources: a peer that
//              has not even authenticated must not be able to impose a 10 ms
//              tick or make the server wait 24 h before declaring it dead.
//              1. merge:  interval = the shorter one, timeout = the longer one
//              2. clamp:  interval = max(interval, bounds.min_interval_ms)
//                         timeout  = min(timeout,  bounds.max_timeout_ms)
//              3. repair: if now timeout < 2 x interval (the clamp moved one
//                         side past the other), first raise the timeout to
//                         min(2 x interval, bounds.max_timeout_ms); if the cap
//                         still leaves it short, lower the interval to
//                         bounds.max_timeout_ms / 2.
//              Both bounds stay hard limits: step 3 never goes below the floor
//              or above the cap (validate_bounds() guarantees
//              max_timeout >= 2 x min_interval, so max_timeout / 2 >= the
//              floor). Raising the timeout comes first because it keeps the
//              tick both sides budgeted for and only makes death detection
//              slower, within the server's cap; a faster tick is the cost the
//              server is protecting itself against, so it is the last resort
//              and never goes below the server's own floor.
//              Without step 2 (wide bounds) step 3 never fires: each side's
//              timeout >= 2 x its interval keeps the merged pair consistent.
//              The values are negotiated even when feature::kKeepalive is not
//              agreed: the message always carries a valid pair, which then
//              means nothing (nobody sends or expects Keepalive).
//   credits, rx_buffer_size are each side's own resources: checked for range,
//              not merged
#pragma once

#include <cstdint>
#include <string_view>

#include "protocol/control.hpp"

namespace pg_rdma::protocol {

// The passive side's keepalive policy, from its own configuration. A valid
// pair has kMinKeepaliveIntervalMs <= min_interval_ms <= kMaxKeepaliveIntervalMs,
// max_timeout_ms <= kMaxKeepaliveTimeoutMs and max_timeout_ms >= 2 x min_interval_ms.
struct KeepaliveBounds {
    std::uint32_t min_interval_ms = 0;  // a peer may not ask for a faster tick
    std::uint32_t max_timeout_ms = 0;   // nor for a longer wait before declaring death
    bool operator==(const KeepaliveBounds&) const = default;
};

// Range checks shared by the decoder and by callers building an offer from
// settings. Returns an empty view when the offer is acceptable, else why not.
std::string_view validate_offer(const FeatureOffer& offer);

// Returns an empty view when some agreement can satisfy `bounds`, else why
// not. For callers building bounds from settings; negotiate() checks it too.
std::string_view validate_bounds(const KeepaliveBounds& bounds);

// Server side. On failure `status` says why and the other fields carry the
// server's offer, so the client can log what the server wanted. An invalid
// offer from either side, or invalid `bounds` (a server misconfiguration: no
// agreement could honour them), is refused with BadParameters. An Ok answer
// has bounds.min_interval_ms <= keepalive_interval_ms,
// keepalive_timeout_ms <= bounds.max_timeout_ms and
// keepalive_timeout_ms >= 2 x keepalive_interval_ms.
FeatureAgreement negotiate(const FeatureOffer& client, const FeatureOffer& server,
                           const KeepaliveBounds& bounds);

// Client side: is this answer one the server could legitimately give to
// `mine`? Returns an empty view when it is, else why not. Checked: the status,
// the version against mine, features only among those offered and the
// required ones present, every value in protocol range, and
// timeout >= 2 x interval. The keepalive pair is the server's decision, so an
// interval longer or a timeout shorter than `mine` offered is accepted.
std::string_view check_agreement(const FeatureOffer& mine, const FeatureAgreement& answer);

}  // namespace pg_rdma::protocol
