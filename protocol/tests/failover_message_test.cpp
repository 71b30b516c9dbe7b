// The failover message (protocol/failover.hpp): round trip, and what a
// decoder must refuse.
#include "testing/catch.hpp"

#include "protocol/failover.hpp"

using namespace pg_rdma::protocol;

TEST_CASE("a failover message round-trips its counts and its resumable flag", "[failover]") {
    for (const bool resumable : {true, false}) {
        const FailoverMessage m{resumable, 0x0102030405060708ull, 40, 42};
        const FailoverBytes bytes = encode_failover(m);
        const auto d = decode_failover(bytes);
        REQUIRE(d.is_ok());
        CHECK(d.consumed == kFailoverMessageSize);
        CHECK(d.value.resumable == resumable);
        CHECK(d.value.received == m.received);
        CHECK(d.value.kept_from == m.kept_from);
        CHECK(d.value.sent == m.sent);
    }
}

TEST_CASE("a short failover message needs more, and a wrong first byte is an error at once", "[failover]") {
    const FailoverBytes bytes = encode_failover({true, 1, 2, 3});
    CHECK(decode_failover({bytes.data(), 0}).status == DecodeStatus::NeedMore);
    CHECK(decode_failover({bytes.data(), kFailoverMessageSize - 1}).status == DecodeStatus::NeedMore);
    const std::uint8_t stray[1] = {'Q'};
    CHECK(decode_failover(stray).status == DecodeStatus::Error);
}

TEST_CASE("a failover message with another version, unknown flags or reserved bytes set is refused",
          "[failover]") {
    for (const std::size_t at : {std::size_t{4}, std::size_t{5}, std::size_t{6}, std::size_t{7}}) {
        FailoverBytes bytes = encode_failover({true, 1, 2, 3});
        bytes[at] ^= 0x80;
        CHECK(decode_failover(bytes).status == DecodeStatus::Error);
    }
    CHECK(decode_failover(encode_failover({true, 1, 5, 4})).status == DecodeStatus::Error);  // holds beyond sent
}

TEST_CASE("both ends reach the same verdict on resuming, each asking with both messages", "[failover]") {
    // a holds b's stream up to 100 and its own from 50 to 80; b the reverse.
    const FailoverMessage a{true, 100, 50, 80};
    const FailoverMessage b{true, 60, 90, 120};
    CHECK(resumable_pair(a, b));
    CHECK(resumable_pair(b, a));
    // b received only 40 of a's stream, but a released up to 50: neither resumes.
    const FailoverMessage short_b{true, 40, 90, 120};
    CHECK_FALSE(resumable_pair(a, short_b));
    CHECK_FALSE(resumable_pair(short_b, a));
    // An end that cannot resume makes the pair unresumable for both.
    const FailoverMessage closing{false, 60, 90, 120};
    CHECK_FALSE(resumable_pair(a, closing));
    CHECK_FALSE(resumable_pair(closing, a));
}
