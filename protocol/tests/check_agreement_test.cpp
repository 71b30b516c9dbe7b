// Client side: check_agreement accepts exactly the answers a server following
// negotiate() could give to this client's offer, whatever its keepalive
// bounds, and names each inconsistency.
#include "testing/catch.hpp"

#include <string_view>

#include "protocol/negotiation.hpp"
#include "samples.hpp"

using namespace pg_rdma::protocol;
using pg_rdma::protocol::test::open_bounds;
using pg_rdma::protocol::test::sample_offer;

namespace {

FeatureOffer my_offer() {
    FeatureOffer o = sample_offer();
    o.min_version = 2;
    o.max_version = 4;
    return o;
}

FeatureOffer server_offer() {
    FeatureOffer o = sample_offer();
    o.max_version = 3;
    return o;
}

constexpr std::string_view kTimeoutTooShort =
    "feature parameters: keepalive timeout shorter than twice the interval";

FeatureAgreement good_answer() { return negotiate(my_offer(), server_offer(), open_bounds()); }

}  // namespace

TEST_CASE("a consistent answer is accepted") {
    REQUIRE(good_answer().status == NegotiationStatus::Ok);
    CHECK(check_agreement(my_offer(), good_answer()).empty());
}

TEST_CASE("a refusal is reported with the server's reason") {
    FeatureAgreement a = good_answer();
    a.status = NegotiationStatus::NoCommonVersion;
    CHECK(check_agreement(my_offer(), a) == "feature agreement: server found no common version");
    a.status = NegotiationStatus::MissingRequiredFeature;
    CHECK(check_agreement(my_offer(), a) == "feature agreement: server found a required feature missing");
    a.status = NegotiationStatus::BadParameters;
    CHECK(check_agreement(my_offer(), a) == "feature agreement: server rejected the parameters");
    a.status = static_cast<NegotiationStatus>(99);
    CHECK(check_agreement(my_offer(), a) == "feature agreement: unknown status");
}

TEST_CASE("a version outside the client's range is rejected") {
    for (const std::uint8_t v : {std::uint8_t{0}, std::uint8_t{1}, std::uint8_t{5}, std::uint8_t{255}}) {
        INFO("version " << int{v});
        FeatureAgreement a = good_answer();
        a.version = v;
        CHECK(check_agreement(my_offer(), a) == "feature agreement: version outside the offered range");
    }
}

TEST_CASE("features the client did not offer are rejected") {
    FeatureOffer mine = my_offer();
    mine.features = kRequiredFeatures;
    FeatureAgreement a = negotiate(mine, server_offer(), open_bounds());
    REQUIRE(check_agreement(mine, a).empty());
    a.features |= feature::kKeepalive;
    CHECK(check_agreement(mine, a) == "feature agreement: features that were not offered");
    a.features = kRequiredFeatures | (1ull << 50);
    CHECK(check_agreement(mine, a) == "feature agreement: features that were not offered");
}

TEST_CASE("an agreement without the required features is rejected") {
    FeatureAgreement a = good_answer();
    a.features &= ~feature::kOrderlyClose;
    CHECK(check_agreement(my_offer(), a) == "feature agreement: a required feature is missing");
    a.features = 0;
    CHECK(check_agreement(my_offer(), a) == "feature agreement: a required feature is missing");
}

TEST_CASE("a keepalive answer clamped by the server's bounds is accepted") {
    FeatureOffer mine = my_offer();
    mine.keepalive_interval_ms = kMinKeepaliveIntervalMs;  // 10 ms
    mine.keepalive_timeout_ms = kMaxKeepaliveTimeoutMs;    // 24 h
    const FeatureAgreement a = negotiate(mine, server_offer(), {2000, 60'000});
    REQUIRE(a.status == NegotiationStatus::Ok);
    REQUIRE(a.keepalive_interval_ms == 2000);
    REQUIRE(a.keepalive_timeout_ms == 60'000);
    CHECK(check_agreement(mine, a).empty());
}

TEST_CASE("a keepalive interval longer or timeout shorter than the client offered is accepted") {
    FeatureAgreement a = good_answer();
    a.keepalive_interval_ms = my_offer().keepalive_interval_ms + 1;
    a.keepalive_timeout_ms = 2 * a.keepalive_interval_ms;
    REQUIRE(a.keepalive_timeout_ms < my_offer().keepalive_timeout_ms);
    CHECK(check_agreement(my_offer(), a).empty());
    a.keepalive_interval_ms = kMaxKeepaliveIntervalMs;
    a.keepalive_timeout_ms = 2 * kMaxKeepaliveIntervalMs;
    CHECK(check_agreement(my_offer(), a).empty());
}

TEST_CASE("a keepalive pair out of range or with timeout below twice the interval is still rejected") {
    FeatureAgreement a = good_answer();
    a.keepalive_interval_ms = kMaxKeepaliveIntervalMs + 1;
    a.keepalive_timeout_ms = kMaxKeepaliveTimeoutMs;
    CHECK(check_agreement(my_offer(), a) == "feature parameters: keepalive interval out of range");
    a = good_answer();
    a.keepalive_interval_ms = 0;
    CHECK(check_agreement(my_offer(), a) == "feature parameters: keepalive interval out of range");
    a = good_answer();
    a.keepalive_interval_ms = 1000;
    a.keepalive_timeout_ms = 1999;
    CHECK(check_agreement(my_offer(), a) == kTimeoutTooShort);
    a.keepalive_timeout_ms = 0;
    CHECK(check_agreement(my_offer(), a) == kTimeoutTooShort);
}

TEST_CASE("an answer without the keepalive feature still needs a valid keepalive pair") {
    FeatureOffer mine = my_offer();
    mine.features = kRequiredFeatures;
    FeatureAgreement a = negotiate(mine, server_offer(), {2000, 60'000});
    REQUIRE(a.status == NegotiationStatus::Ok);
    REQUIRE((a.features & feature::kKeepalive) == 0);
    CHECK(check_agreement(mine, a).empty());
    a.keepalive_timeout_ms = a.keepalive_interval_ms;
    CHECK(check_agreement(mine, a) == kTimeoutTooShort);
}

TEST_CASE("the server's own parameters out of range are rejected") {
    FeatureAgreement a = good_answer();
    a.credits = kMinCredits - 1;
    CHECK(check_agreement(my_offer(), a) == "feature parameters: credits out of range");
    a = good_answer();
    a.rx_buffer_size = kMaxRxBufferSize + kRxBufferAlignment;
    CHECK(check_agreement(my_offer(), a) == "feature parameters: rx_buffer_size out of range");
    a = good_answer();
    a.rx_buffer_size += 1;
    CHECK(check_agreement(my_offer(), a) == "feature parameters: rx_buffer_size not a multiple of 4 KiB");
    a = good_answer();
    a.keepalive_interval_ms = kMinKeepaliveIntervalMs - 1;  // shorter is allowed, below the floor is not
    CHECK(check_agreement(my_offer(), a) == "feature parameters: keepalive interval out of range");
    a = good_answer();
    a.keepalive_timeout_ms = kMaxKeepaliveTimeoutMs + 1;
    CHECK(check_agreement(my_offer(), a) == "feature parameters: keepalive timeout out of range");
}
