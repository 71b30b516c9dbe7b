// libFuzzer target: decode_control, plus negotiation on every offer it accepts.
// Properties: the decoder's general promises; NeedMore exactly when the input
// is shorter than one message; an accepted message re-encodes to the very same
// 32 bytes; an accepted offer passes validate_offer, and whatever negotiate()
// agrees with it passes the client's check_agreement and survives the wire.
#include <algorithm>
#include <cstdint>
#include <variant>

#include "fuzz_check.hpp"
#include "protocol/control.hpp"
#include "protocol/negotiation.hpp"

using namespace pg_rdma::protocol;
using pg_rdma::protocol::fuzz::require;

namespace {

constexpr std::size_t kOffVersion = 2;

FeatureOffer local_offer() {
    return {kMinProtocolVersion, kMaxProtocolVersion, 256, kSupportedFeatures, 1024 * 1024, 1000, 10000};
}

KeepaliveBounds local_bounds() { return {100, 600'000}; }

void check_agreement_on_wire(const FeatureAgreement& a) {
    const auto back = decode_control(encode_control(a));
    require(back.is_ok(), "an agreement from negotiate() decodes");
    require(std::get<FeatureAgreement>(back.value) == a, "an agreement survives encode/decode");
}

void check_negotiation(const FeatureOffer& peer) {
    require(validate_offer(peer).empty(), "a decoded offer is a valid offer");
    // The peer as client, this build as server...
    const FeatureAgreement as_server = negotiate(peer, local_offer(), local_bounds());
    if (as_server.status == NegotiationStatus::Ok)
        require(check_agreement(peer, as_server).empty(), "the client accepts what negotiate() agreed");
    check_agreement_on_wire(as_server);
    // ...and the other way round.
    const FeatureAgreement as_client = negotiate(local_offer(), peer, local_bounds());
    if (as_client.status == NegotiationStatus::Ok)
        require(check_agreement(local_offer(), as_client).empty(), "we accept what negotiate() agreed");
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
    if (const auto* offer = std::get_if<FeatureOffer>(&r.value)) check_negotiation(*offer);
    return 0;
}
