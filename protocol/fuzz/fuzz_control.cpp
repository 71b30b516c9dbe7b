// libFuzzer target: decode_control, plus negotiation on every offer it accepts.
// Properties: the decoder's general promises; NeedMore exactly when the input
// is shorter than one message; an accepted message re-encodes to the very same
// 32 bytes; an accepted offer passes validate_offer, and whatever negotiate()
// agrees with it passes the client's check_agreement, honours the server's
// keepalive bounds and survives the wire; invalid bounds are always refused.
// The bounds come from the 8 bytes after the message (two big-endian u32:
// min_interval_ms, max_timeout_ms) when the input has them, so the fuzzer
// explores the clamp too; shorter inputs use a fixed policy.
#include <algorithm>
#include <cstdint>
#include <variant>

#include "fuzz_check.hpp"
#include "protocol/byte_order.hpp"
#include "protocol/control.hpp"
#include "protocol/negotiation.hpp"

using namespace pg_rdma::protocol;
using pg_rdma::protocol::fuzz::require;

namespace {

constexpr std::size_t kOffVersion = 2;
constexpr std::size_t kBoundsSize = 8;  // after the message: min_interval_ms, max_timeout_ms

FeatureOffer local_offer() {
    return {kMinProtocolVersion, kMaxProtocolVersion, 256, kSupportedFeatures, 1024 * 1024, 1000, 10000};
}

KeepaliveBounds bounds_from(const std::uint8_t* data, std::size_t size) {
    if (size < kControlMessageSize + kBoundsSize) return {100, 600'000};
    return {get_u32(data + kControlMessageSize), get_u32(data + kControlMessageSize + 4)};
}

// What negotiate() promises the server, and the client's check on top.
void check_server_answer(const FeatureOffer& client, const FeatureAgreement& a, const KeepaliveBounds& bounds) {
    if (!validate_bounds(bounds).empty())
        require(a.status == NegotiationStatus::BadParameters, "invalid bounds are refused");
    if (a.status != NegotiationStatus::Ok) return;
    require(a.keepalive_interval_ms >= bounds.min_interval_ms, "the interval is not below the server's floor");
    require(a.keepalive_timeout_ms <= bounds.max_timeout_ms, "the timeout is not above the server's cap");
    require(check_agreement(client, a).empty(), "the client accepts what negotiate() agreed");
}

void check_agreement_on_wire(const FeatureAgreement& a) {
    const auto back = decode_control(encode_control(a));
    require(back.is_ok(), "an agreement from negotiate() decodes");
    require(std::get<FeatureAgreement>(back.value) == a, "an agreement survives encode/decode");
}

void check_negotiation(const FeatureOffer& peer, const KeepaliveBounds& bounds) {
    require(validate_offer(peer).empty(), "a decoded offer is a valid offer");
    // The peer as client, this build as server...
    const FeatureAgreement as_server = negotiate(peer, local_offer(), bounds);
    check_server_answer(peer, as_server, bounds);
    check_agreement_on_wire(as_server);
    // ...and the other way round.
    check_server_answer(local_offer(), negotiate(local_offer(), peer, bounds), bounds);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto r = decode_control({data, size});
    pg_rdma::protocol::fuzz::check_decoded(r, size);
    require((r.status == DecodeStatus::NeedMore) == (size < kControlMessageSize),
            "NeedMore exactly when shorter than a message");
    if (!r.is_ok()) return 0;
    require(r.consumed == kControlMessageSize, "a message consumes 32 bytes");
    const ControlBytes again = encode_control(r.value, data[kOffVersion]);
    require(std::equal(again.begin(), again.end(), data), "an accepted message re-encodes identically");
    if (const auto* offer = std::get_if<FeatureOffer>(&r.value))
        check_negotiation(*offer, bounds_from(data, size));
    return 0;
}
