#include "testing/catch.hpp"

#include "transport/credits.hpp"

using namespace pg_rdma::transport;

TEST_CASE("sender keeps a reserve of credits for control messages", "[credits]") {
    SendCredits c;
    REQUIRE(c.on_grant(8, 4096));
    for (int i = 0; i < 5; ++i) {
        REQUIRE(c.can_send_data());
        c.use();
    }
    CHECK(c.available() == 3);
    c.use();
    CHECK_FALSE(c.can_send_data());  // only the reserve is left
    CHECK(c.can_send_control());
    c.use();
    c.use();
    CHECK_FALSE(c.can_send_control());
}

TEST_CASE("sender credit grants are cumulative and checked", "[credits]") {
    SendCredits c;
    REQUIRE(c.on_grant(64, 4096));
    CHECK_FALSE(c.on_grant(63, 4096));    // backwards
    CHECK_FALSE(c.on_grant(5000, 4096));  // more outstanding than any queue
    CHECK(c.on_grant(64, 4096));          // repeated grant is harmless
}

TEST_CASE("sender credit counters survive 32-bit wrap-around", "[credits]") {
    SendCredits c;
    std::uint32_t granted = 4;
    // Walk the counters up to the wrap point and across it.
    for (std::uint64_t round = 0; round < (1ull << 32) / 4096 + 2; ++round) {
        granted += 4000;
        REQUIRE(c.on_grant(granted, 4096));
        for (int i = 0; i < 4000; ++i) c.use();
    }
    CHECK(c.available() == 4);
}

TEST_CASE("receiver grants once the peer is down to half its credits", "[credits]") {
    RecvCredits r(16);
    for (int i = 0; i < 7; ++i) {
        REQUIRE(r.on_received());
        r.on_reposted();
        CHECK_FALSE(r.grant_due());
    }
    REQUIRE(r.on_received());
    r.on_reposted();
    REQUIRE(r.grant_due());  // the peer has 8 left of 16
    CHECK(r.take_grant() == 24);
    CHECK(r.peer_remaining() == 16);
    CHECK_FALSE(r.grant_due());
}

TEST_CASE("receiver detects a peer sending without credits", "[credits]") {
    RecvCredits r(4);
    for (int i = 0; i < 4; ++i) REQUIRE(r.on_received());
    CHECK_FALSE(r.on_received());
}
