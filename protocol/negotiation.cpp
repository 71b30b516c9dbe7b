// Feature negotiation: the rules are stated in negotiation.hpp; this file only
// applies them. No I/O and no state, so every rule has a unit test.
#include "protocol/negotiation.hpp"

#include <algorithm>

namespace pg_rdma::protocol {
namespace {

// A pair of peers each satisfying timeout >= 2 x interval keeps satisfying it
// after the min/max merge; the limits must allow such a pair to exist, and the
// clamp's repair step (negotiation.hpp) restores it after the bounds.
inline constexpr std::uint32_t kKeepaliveTimeoutFactor = 2;
static_assert(kMaxKeepaliveIntervalMs * std::uint64_t{kKeepaliveTimeoutFactor} <= kMaxKeepaliveTimeoutMs);
static_assert(kMinRxBufferSize % kRxBufferAlignment == 0 && kMaxRxBufferSize % kRxBufferAlignment == 0);
static_assert(kMinCredits <= kMaxCredits && kMinProtocolVersion <= kMaxProtocolVersion);

// 0 is never a valid version, so it can mean "the ranges do not meet".
constexpr std::uint8_t kNoVersion = 0;
static_assert(kMinProtocolVersion > kNoVersion);

std::string_view validate_keepalive(std::uint32_t interval_ms, std::uint32_t timeout_ms) {
    if (interval_ms < kMinKeepaliveIntervalMs || interval_ms > kMaxKeepaliveIntervalMs)
        return "feature parameters: keepalive interval out of range";
    if (timeout_ms > kMaxKeepaliveTimeoutMs)
        return "feature parameters: keepalive timeout out of range";
    // 64-bit product: no overflow whatever the interval (it is bounded anyway).
    if (timeout_ms < std::uint64_t{interval_ms} * kKeepaliveTimeoutFactor)
        return "feature parameters: keepalive timeout shorter than twice the interval";
    return {};
}

struct KeepalivePair {
    std::uint32_t interval_ms;
    std::uint32_t timeout_ms;
};

// The keepalive rule of negotiation.hpp, steps 1 to 3. Needs valid offers and
// valid bounds; the result then satisfies validate_keepalive() and the bounds.
KeepalivePair clamp_keepalive(const FeatureOffer& client, const FeatureOffer& server,
                              const KeepaliveBounds& bounds) {
    std::uint32_t interval = std::min(client.keepalive_interval_ms, server.keepalive_interval_ms);
    std::uint32_t timeout = std::max(client.keepalive_timeout_ms, server.keepalive_timeout_ms);
    interval = std::max(interval, bounds.min_interval_ms);
    timeout = std::min(timeout, bounds.max_timeout_ms);
    // 64-bit product, as in validate_keepalive().
    const std::uint64_t wanted = std::uint64_t{interval} * kKeepaliveTimeoutFactor;
    if (timeout < wanted) {
        timeout = static_cast<std::uint32_t>(std::min<std::uint64_t>(wanted, bounds.max_timeout_ms));
        // Only when the cap is below twice the interval; the cap is at least
        // twice the floor, so this stays at or above it.
        if (timeout < wanted) interval = bounds.max_timeout_ms / kKeepaliveTimeoutFactor;
    }
    return {interval, timeout};
}

std::uint8_t highest_common_version(const FeatureOffer& a, const FeatureOffer& b) {
    const std::uint8_t low = std::max(a.min_version, b.min_version);
    const std::uint8_t high = std::min(a.max_version, b.max_version);
    return low <= high ? high : kNoVersion;
}

// A refusal carries the server's offer so the client can log what it wanted;
// the version field holds the highest version the server speaks.
FeatureAgreement refusal(const FeatureOffer& server, NegotiationStatus why) {
    return {server.max_version, why,
            server.credits, server.features,
            server.rx_buffer_size, server.keepalive_interval_ms,
            server.keepalive_timeout_ms};
}

std::string_view refusal_reason(NegotiationStatus status) {
    switch (status) {
        case NegotiationStatus::Ok: return {};
        case NegotiationStatus::NoCommonVersion: return "feature agreement: server found no common version";
        case NegotiationStatus::MissingRequiredFeature:
            return "feature agreement: server found a required feature missing";
        case NegotiationStatus::BadParameters: return "feature agreement: server rejected the parameters";
    }
    return "feature agreement: unknown status";
}

}  // namespace

std::string_view validate_offer(const FeatureOffer& offer) {
    if (offer.min_version == kNoVersion || offer.min_version > offer.max_version)
        return "feature parameters: bad version range";
    if (offer.credits < kMinCredits || offer.credits > kMaxCredits)
        return "feature parameters: credits out of range";
    if (offer.rx_buffer_size < kMinRxBufferSize || offer.rx_buffer_size > kMaxRxBufferSize)
        return "feature parameters: rx_buffer_size out of range";
    if (offer.rx_buffer_size % kRxBufferAlignment != 0)
        return "feature parameters: rx_buffer_size not a multiple of 4 KiB";
    // Checked even without feature::kKeepalive: the agreement always carries
    // both values, and a peer must not be able to smuggle nonsense through.
    return validate_keepalive(offer.keepalive_interval_ms, offer.keepalive_timeout_ms);
}

std::string_view validate_bounds(const KeepaliveBounds& bounds) {
    if (bounds.min_interval_ms < kMinKeepaliveIntervalMs || bounds.min_interval_ms > kMaxKeepaliveIntervalMs)
        return "keepalive bounds: minimum interval out of range";
    if (bounds.max_timeout_ms > kMaxKeepaliveTimeoutMs) return "keepalive bounds: maximum timeout out of range";
    if (bounds.max_timeout_ms < std::uint64_t{bounds.min_interval_ms} * kKeepaliveTimeoutFactor)
        return "keepalive bounds: maximum timeout shorter than twice the minimum interval";
    return {};
}

FeatureAgreement negotiate(const FeatureOffer& client, const FeatureOffer& server,
                           const KeepaliveBounds& bounds) {
    if (!validate_offer(client).empty() || !validate_offer(server).empty() || !validate_bounds(bounds).empty())
        return refusal(server, NegotiationStatus::BadParameters);
    const std::uint8_t version = highest_common_version(client, server);
    if (version == kNoVersion) return refusal(server, NegotiationStatus::NoCommonVersion);
    // Masking with kSupportedFeatures too keeps bits this build does not know
    // out of the agreement even if the server's own offer carried them.
    const std::uint64_t features = client.features & server.features & kSupportedFeatures;
    if ((features & kRequiredFeatures) != kRequiredFeatures)
        return refusal(server, NegotiationStatus::MissingRequiredFeature);
    // Negotiated whether or not kKeepalive made it into `features`: the
    // message always carries a valid pair (negotiation.hpp).
    const KeepalivePair keepalive = clamp_keepalive(client, server, bounds);
    return {version, NegotiationStatus::Ok,
            server.credits, features,
            server.rx_buffer_size,
            keepalive.interval_ms, keepalive.timeout_ms};
}

std::string_view check_agreement(const FeatureOffer& mine, const FeatureAgreement& answer) {
    if (answer.status != NegotiationStatus::Ok) return refusal_reason(answer.status);
    if (answer.version < mine.min_version || answer.version > mine.max_version)
        return "feature agreement: version outside the offered range";
    if ((answer.features & ~mine.features) != 0) return "feature agreement: features that were not offered";
    if ((answer.features & kRequiredFeatures) != kRequiredFeatures)
        return "feature agreement: a required feature is missing";
    // The keepalive pair is the server's decision within its own bounds, which
    // the client does not know; like the server's own resources it only has to
    // meet the ranges (and timeout >= 2 x interval) of any offer.
    return validate_offer({answer.version, answer.version, answer.credits, answer.features,
                           answer.rx_buffer_size, answer.keepalive_interval_ms,
                           answer.keepalive_timeout_ms});
}

}  // namespace pg_rdma::protocol
