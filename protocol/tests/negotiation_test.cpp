// Server-side negotiation: version, features and keepalive are merged by the
// rules in negotiation.hpp, keepalive within the server's bounds; invalid
// offers and invalid bounds are refused with BadParameters.
#include "testing/catch.hpp"

#include <algorithm>
#include <cstdint>
#include <variant>
#include <vector>

#include "protocol/control.hpp"
#include "protocol/negotiation.hpp"
#include "samples.hpp"

using namespace pg_rdma::protocol;
using pg_rdma::protocol::test::open_bounds;
using pg_rdma::protocol::test::sample_offer;

namespace {

FeatureOffer offer_with_versions(std::uint8_t min, std::uint8_t max) {
    FeatureOffer o = sample_offer();
    o.min_version = min;
    o.max_version = max;
    return o;
}

FeatureOffer offer_with_features(std::uint64_t features) {
    FeatureOffer o = sample_offer();
    o.features = features;
    return o;
}

FeatureOffer offer_with_keepalive(std::uint32_t interval_ms, std::uint32_t timeout_ms) {
    FeatureOffer o = sample_offer();
    o.keepalive_interval_ms = interval_ms;
    o.keepalive_timeout_ms = timeout_ms;
    return o;
}

// A refusal describes the server's offer.
void check_refusal(const FeatureAgreement& a, NegotiationStatus status, const FeatureOffer& server) {
    CHECK(a.status == status);
    CHECK(a.version == server.max_version);
    CHECK(a.credits == server.credits);
    CHECK(a.features == server.features);
    CHECK(a.rx_buffer_size == server.rx_buffer_size);
    CHECK(a.keepalive_interval_ms == server.keepalive_interval_ms);
    CHECK(a.keepalive_timeout_ms == server.keepalive_timeout_ms);
}

}  // namespace

TEST_CASE("validate_offer accepts the limits themselves") {
    CHECK(validate_offer(sample_offer()).empty());
    CHECK(validate_offer({1, 1, kMinCredits, 0, kMinRxBufferSize, kMinKeepaliveIntervalMs,
                          2 * kMinKeepaliveIntervalMs})
              .empty());
    CHECK(validate_offer({1, 255, kMaxCredits, ~0ull, kMaxRxBufferSize, kMaxKeepaliveIntervalMs,
                          kMaxKeepaliveTimeoutMs})
              .empty());
}

TEST_CASE("validate_offer names the first field out of range") {
    FeatureOffer o = sample_offer();
    o.max_version = 0;
    CHECK(validate_offer(o) == "feature parameters: bad version range");
    o = sample_offer();
    o.credits = kMaxCredits + 1;
    CHECK(validate_offer(o) == "feature parameters: credits out of range");
    o = sample_offer();
    o.rx_buffer_size = kMinRxBufferSize / 2;
    CHECK(validate_offer(o) == "feature parameters: rx_buffer_size out of range");
    o = sample_offer();
    o.rx_buffer_size = kMinRxBufferSize * 3 / 2;
    CHECK(validate_offer(o) == "feature parameters: rx_buffer_size not a multiple of 4 KiB");
    CHECK(validate_offer(offer_with_keepalive(kMinKeepaliveIntervalMs - 1, 1000)) ==
          "feature parameters: keepalive interval out of range");
    CHECK(validate_offer(offer_with_keepalive(1000, kMaxKeepaliveTimeoutMs + 1)) ==
          "feature parameters: keepalive timeout out of range");
    CHECK(validate_offer(offer_with_keepalive(1000, 1999)) ==
          "feature parameters: keepalive timeout shorter than twice the interval");
}

TEST_CASE("two identical offers agree on everything they offer") {
    const FeatureAgreement a = negotiate(sample_offer(), sample_offer(), open_bounds());
    CHECK(a.status == NegotiationStatus::Ok);
    CHECK(a.version == kMaxProtocolVersion);
    CHECK(a.features == kSupportedFeatures);
    CHECK(a.keepalive_interval_ms == sample_offer().keepalive_interval_ms);
    CHECK(a.keepalive_timeout_ms == sample_offer().keepalive_timeout_ms);
}

TEST_CASE("the highest version both ranges contain is chosen") {
    CHECK(negotiate(offer_with_versions(1, 3), offer_with_versions(1, 2), open_bounds()).version == 2);
    CHECK(negotiate(offer_with_versions(2, 5), offer_with_versions(1, 3), open_bounds()).version == 3);
    CHECK(negotiate(offer_with_versions(1, 1), offer_with_versions(1, 9), open_bounds()).version == 1);
    CHECK(negotiate(offer_with_versions(4, 4), offer_with_versions(2, 4), open_bounds()).version == 4);
}

TEST_CASE("ranges that do not meet have no common version") {
    const FeatureOffer server = offer_with_versions(1, 1);
    check_refusal(negotiate(offer_with_versions(2, 3), server, open_bounds()),
                  NegotiationStatus::NoCommonVersion, server);
    const FeatureOffer newer_server = offer_with_versions(3, 4);
    check_refusal(negotiate(offer_with_versions(1, 2), newer_server, open_bounds()),
                  NegotiationStatus::NoCommonVersion, newer_server);
}

TEST_CASE("feature bits unknown to either side drop out of the agreement") {
    constexpr std::uint64_t kUnknown = (1ull << 40) | (1ull << 63);
    const FeatureAgreement a = negotiate(offer_with_features(kSupportedFeatures | kUnknown),
                                         offer_with_features(kSupportedFeatures), open_bounds());
    CHECK(a.status == NegotiationStatus::Ok);
    CHECK(a.features == kSupportedFeatures);
    // Even when both sides claim them, this build does not agree to bits it
    // does not know.
    const FeatureAgreement both = negotiate(offer_with_features(kSupportedFeatures | kUnknown),
                                            offer_with_features(kSupportedFeatures | kUnknown), open_bounds());
    CHECK(both.features == kSupportedFeatures);
}

TEST_CASE("an optional feature only one side offers is left out") {
    const FeatureAgreement a = negotiate(offer_with_features(kRequiredFeatures), sample_offer(), open_bounds());
    CHECK(a.status == NegotiationStatus::Ok);
    CHECK(a.features == kRequiredFeatures);
    CHECK((a.features & feature::kKeepalive) == 0);
}

TEST_CASE("a required feature missing on either side fails the negotiation") {
    const FeatureOffer server = sample_offer();
    check_refusal(
        negotiate(offer_with_features(kSupportedFeatures & ~feature::kRingCredits), server, open_bounds()),
        NegotiationStatus::MissingRequiredFeature, server);
    const FeatureOffer poor_server = offer_with_features(kSupportedFeatures & ~feature::kOrderlyClose);
    check_refusal(negotiate(sample_offer(), poor_server, open_bounds()),
                  NegotiationStatus::MissingRequiredFeature, poor_server);
    check_refusal(negotiate(offer_with_features(0), server, open_bounds()),
                  NegotiationStatus::MissingRequiredFeature, server);
}

TEST_CASE("within open bounds keepalive takes the shorter interval and the longer timeout") {
    const FeatureAgreement a =
        negotiate(offer_with_keepalive(1000, 10000), offer_with_keepalive(500, 3000), open_bounds());
    CHECK(a.status == NegotiationStatus::Ok);
    CHECK(a.keepalive_interval_ms == 500);
    CHECK(a.keepalive_timeout_ms == 10000);
    const FeatureAgreement b =
        negotiate(offer_with_keepalive(20, 40), offer_with_keepalive(60000, 120000), open_bounds());
    CHECK(b.keepalive_interval_ms == 20);
    CHECK(b.keepalive_timeout_ms == 120000);
    CHECK(b.keepalive_timeout_ms >= 2 * b.keepalive_interval_ms);
}

TEST_CASE("credits and RX buffer size in the agreement are the server's own") {
    FeatureOffer client = sample_offer();
    client.credits = kMinCredits;
    client.rx_buffer_size = kMinRxBufferSize;
    FeatureOffer server = sample_offer();
    server.credits = kMaxCredits;
    server.rx_buffer_size = kMaxRxBufferSize;
    const FeatureAgreement a = negotiate(client, server, open_bounds());
    CHECK(a.credits == kMaxCredits);
    CHECK(a.rx_buffer_size == kMaxRxBufferSize);
}

TEST_CASE("an invalid offer from either side is refused as bad parameters") {
    const FeatureOffer server = sample_offer();
    FeatureOffer client = sample_offer();
    client.credits = 0;
    check_refusal(negotiate(client, server, open_bounds()), NegotiationStatus::BadParameters, server);
    client = offer_with_keepalive(1000, 1000);
    check_refusal(negotiate(client, server, open_bounds()), NegotiationStatus::BadParameters, server);
    FeatureOffer bad_server = sample_offer();
    bad_server.rx_buffer_size = 12345;
    check_refusal(negotiate(sample_offer(), bad_server, open_bounds()), NegotiationStatus::BadParameters,
                  bad_server);
    // Bad parameters win over the other failures: nothing else is looked at.
    FeatureOffer hopeless = offer_with_versions(7, 7);
    hopeless.features = 0;
    hopeless.rx_buffer_size = 0;
    check_refusal(negotiate(hopeless, server, open_bounds()), NegotiationStatus::BadParameters, server);
}

TEST_CASE("an agreement reached by negotiate passes the client's check") {
    const FeatureOffer clients[] = {sample_offer(), offer_with_keepalive(20, 86'400'000),
                                    offer_with_features(kRequiredFeatures), offer_with_versions(1, 200)};
    const FeatureOffer servers[] = {sample_offer(), offer_with_keepalive(3'600'000, 7'200'000),
                                    offer_with_features(~0ull)};
    for (const FeatureOffer& c : clients) {
        for (const FeatureOffer& s : servers) {
            const FeatureAgreement a = negotiate(c, s, open_bounds());
            REQUIRE(a.status == NegotiationStatus::Ok);
            CHECK(check_agreement(c, a).empty());
        }
    }
}

// ---- keepalive bounds: the server stays in control of its own resources ----

TEST_CASE("validate_bounds accepts the limits themselves") {
    CHECK(validate_bounds(open_bounds()).empty());
    CHECK(validate_bounds({kMinKeepaliveIntervalMs, 2 * kMinKeepaliveIntervalMs}).empty());
    CHECK(validate_bounds({kMaxKeepaliveIntervalMs, kMaxKeepaliveTimeoutMs}).empty());
    CHECK(validate_bounds({1000, 2000}).empty());
}

TEST_CASE("validate_bounds rejects bounds no agreement could satisfy") {
    CHECK(validate_bounds({0, 60'000}) == "keepalive bounds: minimum interval out of range");
    CHECK(validate_bounds({kMinKeepaliveIntervalMs - 1, 60'000}) ==
          "keepalive bounds: minimum interval out of range");
    CHECK(validate_bounds({kMaxKeepaliveIntervalMs + 1, kMaxKeepaliveTimeoutMs}) ==
          "keepalive bounds: minimum interval out of range");
    CHECK(validate_bounds({1000, kMaxKeepaliveTimeoutMs + 1}) ==
          "keepalive bounds: maximum timeout out of range");
    CHECK(validate_bounds({1000, 1999}) ==
          "keepalive bounds: maximum timeout shorter than twice the minimum interval");
    CHECK(validate_bounds({1000, 0}) ==
          "keepalive bounds: maximum timeout shorter than twice the minimum interval");
}

TEST_CASE("invalid keepalive bounds make negotiate refuse with bad parameters") {
    const FeatureOffer server = sample_offer();
    const KeepaliveBounds invalid[] = {{0, 0}, {kMinKeepaliveIntervalMs - 1, 60'000},
                                       {kMaxKeepaliveIntervalMs + 1, kMaxKeepaliveTimeoutMs},
                                       {1000, kMaxKeepaliveTimeoutMs + 1}, {1000, 1999}};
    for (const KeepaliveBounds& b : invalid) {
        INFO("bounds " << b.min_interval_ms << " / " << b.max_timeout_ms);
        check_refusal(negotiate(sample_offer(), server, b), NegotiationStatus::BadParameters, server);
    }
}

TEST_CASE("a client asking for a 10 ms tick and a 24 h timeout gets the server's floor and cap") {
    const FeatureOffer greedy = offer_with_keepalive(kMinKeepaliveIntervalMs, kMaxKeepaliveTimeoutMs);
    const FeatureAgreement a = negotiate(greedy, offer_with_keepalive(1000, 5000), {500, 30'000});
    REQUIRE(a.status == NegotiationStatus::Ok);
    CHECK(a.keepalive_interval_ms == 500);
    CHECK(a.keepalive_timeout_ms == 30'000);
    // The floor applies even when the server's own offer is faster still.
    const FeatureAgreement b = negotiate(greedy, offer_with_keepalive(20, 40), {500, 30'000});
    CHECK(b.keepalive_interval_ms == 500);
    CHECK(b.keepalive_timeout_ms == 30'000);
}

TEST_CASE("a client asking milder keepalive values than the bounds gets them") {
    const KeepaliveBounds bounds{100, 600'000};
    // The client's interval is the shorter, the client's timeout the longer.
    const FeatureOffer server = offer_with_keepalive(5000, 10'000);
    const FeatureAgreement a = negotiate(offer_with_keepalive(2000, 20'000), server, bounds);
    REQUIRE(a.status == NegotiationStatus::Ok);
    CHECK(a.keepalive_interval_ms == 2000);
    CHECK(a.keepalive_timeout_ms == 20'000);
    // Both exactly at the bounds are not clamped further.
    const FeatureAgreement b = negotiate(offer_with_keepalive(100, 600'000), server, bounds);
    CHECK(b.keepalive_interval_ms == 100);
    CHECK(b.keepalive_timeout_ms == 600'000);
}

TEST_CASE("when the floor lifts the interval past half the timeout the timeout is raised to twice it") {
    const FeatureOffer fast = offer_with_keepalive(10, 20);
    const FeatureAgreement a = negotiate(fast, fast, {1000, 60'000});
    REQUIRE(a.status == NegotiationStatus::Ok);
    CHECK(a.keepalive_interval_ms == 1000);
    CHECK(a.keepalive_timeout_ms == 2000);
}

TEST_CASE("when the cap leaves no room for twice the interval the interval drops to half the cap") {
    const FeatureOffer slow = offer_with_keepalive(60'000, 120'000);
    const FeatureAgreement a = negotiate(slow, slow, {100, 60'001});
    REQUIRE(a.status == NegotiationStatus::Ok);
    CHECK(a.keepalive_interval_ms == 30'000);
    CHECK(a.keepalive_timeout_ms == 60'001);
    // Never below the floor: a cap of exactly twice the floor pins both.
    const FeatureAgreement b = negotiate(slow, slow, {1000, 2000});
    CHECK(b.keepalive_interval_ms == 1000);
    CHECK(b.keepalive_timeout_ms == 2000);
}

TEST_CASE("negotiated keepalive stays within the bounds with timeout at least twice the interval over a grid") {
    // Intervals at the protocol limits and on both sides of the bounds below,
    // each offered with the shortest legal timeout, one just above, a roomy
    // one and the longest.
    const std::uint32_t intervals[] = {kMinKeepaliveIntervalMs, 11, 99, 100, 101, 1000, 29'999, 30'000,
                                       30'001, 1'000'000, kMaxKeepaliveIntervalMs};
    std::vector<FeatureOffer> offers;
    for (const std::uint32_t i : intervals)
        for (const std::uint32_t t : {2 * i, 2 * i + 1, 7 * i, kMaxKeepaliveTimeoutMs})
            if (t <= kMaxKeepaliveTimeoutMs) offers.push_back(offer_with_keepalive(i, t));
    const std::uint32_t min_intervals[] = {kMinKeepaliveIntervalMs, 100, 1000, 30'000, kMaxKeepaliveIntervalMs};
    const std::uint32_t max_timeouts[] = {20,     199,    200,       2000,
                                          2001,   60'000, 60'001,    7'200'000,
                                          kMaxKeepaliveTimeoutMs};
    std::size_t agreements = 0, valid_bounds = 0;
    for (const std::uint32_t floor : min_intervals) {
        for (const std::uint32_t cap : max_timeouts) {
            const KeepaliveBounds bounds{floor, cap};
            if (!validate_bounds(bounds).empty()) continue;  // refusal: its own test
            ++valid_bounds;
            for (const FeatureOffer& c : offers) {
                for (const FeatureOffer& s : offers) {
                    const FeatureAgreement a = negotiate(c, s, bounds);
                    const std::uint32_t i = a.keepalive_interval_ms, t = a.keepalive_timeout_ms;
                    const std::uint32_t merged_i = std::min(c.keepalive_interval_ms, s.keepalive_interval_ms);
                    const std::uint32_t merged_t = std::max(c.keepalive_timeout_ms, s.keepalive_timeout_ms);
                    const bool holds = a.status == NegotiationStatus::Ok && i >= floor && t <= cap &&
                                       std::uint64_t{t} >= 2ull * i && check_agreement(c, a).empty();
                    // A merged pair already inside the bounds is left alone.
                    const bool untouched =
                        merged_i < floor || merged_t > cap || (i == merged_i && t == merged_t);
                    if (holds && untouched) {
                        ++agreements;
                        continue;
                    }
                    INFO("client " << c.keepalive_interval_ms << "/" << c.keepalive_timeout_ms << " server "
                                   << s.keepalive_interval_ms << "/" << s.keepalive_timeout_ms << " bounds "
                                   << floor << "/" << cap << " -> " << i << "/" << t);
                    CHECK(holds);
                    CHECK(untouched);
                }
            }
        }
    }
    CHECK(valid_bounds > 20);
    CHECK(agreements == valid_bounds * offers.size() * offers.size());
}

TEST_CASE("without the keepalive feature the agreement still carries a valid clamped pair") {
    FeatureOffer client = offer_with_keepalive(kMinKeepaliveIntervalMs, kMaxKeepaliveTimeoutMs);
    client.features = kRequiredFeatures;
    const FeatureAgreement a = negotiate(client, sample_offer(), {500, 30'000});
    REQUIRE(a.status == NegotiationStatus::Ok);
    CHECK((a.features & feature::kKeepalive) == 0);
    CHECK(a.keepalive_interval_ms == 500);
    CHECK(a.keepalive_timeout_ms == 30'000);
    CHECK(check_agreement(client, a).empty());
    const auto back = decode_control(encode_control(a));
    REQUIRE(back.is_ok());
    CHECK(std::get<FeatureAgreement>(back.value) == a);
}
