#include "testing/catch.hpp"

#include "transport/adaptive_spin.hpp"

using pg_rdma::transport::AdaptiveSpin;
using namespace std::chrono_literals;

TEST_CASE("a new connection spins only the base time", "[adaptive_spin]") {
    AdaptiveSpin spin(50us, 500us);
    CHECK(spin.budget(true) == 50us);
    CHECK(spin.budget(false) == 50us);
}

TEST_CASE("short request-response waits raise the spin to catch the answer", "[adaptive_spin]") {
    AdaptiveSpin spin(50us, 500us);
    for (int i = 0; i < 100; ++i) spin.on_wait(200us);
    CHECK(spin.reply_budget() >= 290us);
    CHECK(spin.reply_budget() <= 310us);  // 1.5 x 200 us
    CHECK(spin.budget(true) == spin.reply_budget());
}

TEST_CASE("the spin never exceeds its maximum nor drops below its base", "[adaptive_spin]") {
    AdaptiveSpin spin(50us, 500us);
    for (int i = 0; i < 100; ++i) spin.on_wait(400us);
    CHECK(spin.reply_budget() == 500us);  // 600 us wanted, capped
    // The tail estimate remembers the 400 us replies for some hundreds of
    // waits (below), then the base is the floor.
    for (int i = 0; i < 1000; ++i) spin.on_wait(5us);
    CHECK(spin.reply_budget() == 50us);
}

namespace {
// Replies at 40 us, but one in 50 at 300 us: 1.5 x the average (about
// 70 us) would let every late one come after the spin.
void quick_but_sometimes_late(AdaptiveSpin& spin, int waits) {
    for (int i = 1; i <= waits; ++i) spin.on_wait(i % 50 == 25 ? 300us : 40us);  // the last 25 quick
}
}  // namespace

TEST_CASE("replies that are quick but now and then late raise the spin to catch the late ones too",
          "[adaptive_spin]") {
    AdaptiveSpin spin(50us, 500us);
    quick_but_sometimes_late(spin, 2000);
    REQUIRE(spin.average() * 3 / 2 < 100us);
    // The estimate settles where about 1 reply in 120 comes later: around
    // the late ones, rising past them at each and falling between them.
    CHECK(spin.reply_budget() >= 200us);
    CHECK(spin.reply_budget() <= 500us);
}

TEST_CASE("once no reply comes late the spin falls back to 1.5 x the average within some hundreds of waits",
          "[adaptive_spin]") {
    AdaptiveSpin spin(50us, 500us);
    quick_but_sometimes_late(spin, 2000);
    REQUIRE(spin.reply_budget() >= 200us);
    for (int i = 0; i < 800; ++i) spin.on_wait(40us);
    CHECK(spin.reply_budget() == 60us);
}

TEST_CASE("a wait that slept and ended after the maximum leaves the tail estimate alone", "[adaptive_spin]") {
    AdaptiveSpin spin(50us, 500us);
    quick_but_sometimes_late(spin, 2000);
    const auto tail = spin.tail();
    // Think time, and replies that may have come after the maximum: no
    // proof that a spin up to the maximum would have caught them.
    spin.on_slept_wait(10s, 500us);
    spin.on_slept_wait(1001us, 50us);
    spin.on_slept_wait(900us, spin.reply_budget());
    CHECK(spin.tail() == tail);
}

TEST_CASE("quick replies with every sixth after the maximum do not hold the spin at its maximum", "[adaptive_spin]") {
    // A client that works about a millisecond between some statements:
    // those waits sleep whatever the spin, and spinning the maximum for
    // them would only burn it.
    AdaptiveSpin spin(50us, 500us);
    for (int i = 1; i <= 600; ++i) {
        if (i % 6 == 0) spin.on_slept_wait(900us, spin.reply_budget());
        else spin.on_wait(40us);
    }
    // 1.5 x the average: the 900 us waits count in it as near misses.
    CHECK(spin.reply_budget() < 200us);
}

TEST_CASE("a reply that came after a spin, measured through a sleep, raises the tail estimate", "[adaptive_spin]") {
    AdaptiveSpin spin(50us, 500us);
    for (int i = 0; i < 100; ++i) spin.on_wait(40us);
    const auto tail = spin.tail();
    spin.on_slept_wait(400us, spin.reply_budget());
    CHECK(spin.tail() > tail);
}

TEST_CASE("replies just after the base spin, measured through a sleep, bring the spin back to its maximum",
          "[adaptive_spin]") {
    AdaptiveSpin spin(50us, 500us);
    // Replies at 460 us after a 50 us spin, each seen 300 us later through
    // a wakeup: as measured they average above the maximum, as they came
    // they do not. A new connection (average twice the maximum) gets there
    // within a dozen.
    for (int i = 0; i < 12; ++i) spin.on_slept_wait(760us, 50us);
    CHECK(spin.reply_budget() == 500us);
    // Then caught by that spin, at 460 us: the budget stays above them.
    for (int i = 0; i < 100; ++i) spin.on_wait(460us);
    CHECK(spin.reply_budget() == 500us);
}

TEST_CASE("waits that a spin of the maximum could not have caught drop the spin to its base", "[adaptive_spin]") {
    struct Case {
        const char* what;
        std::chrono::nanoseconds waited, spun;
    };
    for (const Case& c : {Case{"an idle session", 2s, 50us},
                          Case{"replies the maximum spin missed", 720us, 500us},
                          Case{"think time over twice the maximum, not a near miss", 1001us, 50us}}) {
        INFO(c.what);
        AdaptiveSpin spin(50us, 500us);
        for (int i = 0; i < 100; ++i) spin.on_wait(200us);
        REQUIRE(spin.reply_budget() > 50us);
        for (int i = 0; i < 100; ++i) spin.on_slept_wait(c.waited, c.spun);
        CHECK(spin.reply_budget() == 50us);
    }
}

TEST_CASE("one long idle wait does not hold the spin at its base for long", "[adaptive_spin]") {
    AdaptiveSpin spin(50us, 500us);
    for (int i = 0; i < 100; ++i) spin.on_slept_wait(10s, 50us);  // an idle session
    REQUIRE(spin.reply_budget() == 50us);
    int waits = 0;
    while (spin.reply_budget() == 50us && waits < 100) {
        spin.on_wait(200us);  // then a burst of queries
        ++waits;
    }
    CHECK(waits <= 16);
}

TEST_CASE("waits that are not for a reply spin the base time however short replies are", "[adaptive_spin]") {
    AdaptiveSpin spin(50us, 500us);
    for (int i = 0; i < 100; ++i) spin.on_wait(200us);
    REQUIRE(spin.reply_budget() > 50us);
    CHECK(spin.budget(false) == 50us);
}

TEST_CASE("spins that keep catching nothing stop, but for a probe every so often", "[adaptive_spin]") {
    AdaptiveSpin spin(50us, 500us);
    for (int i = 0; i < 20; ++i) spin.on_spin(false);
    REQUIRE_FALSE(spin.spinning_pays());
    int spun = 0;
    for (int i = 0; i < 10 * AdaptiveSpin::kProbeEvery; ++i) spun += spin.budget(false) > 0us ? 1 : 0;
    CHECK(spun == 10);
}

TEST_CASE("probes that catch something bring the spin back", "[adaptive_spin]") {
    AdaptiveSpin spin(50us, 500us);
    for (int i = 0; i < 20; ++i) spin.on_spin(false);
    REQUIRE_FALSE(spin.spinning_pays());
    for (int i = 0; i < 3; ++i) spin.on_spin(true);
    CHECK(spin.spinning_pays());
    CHECK(spin.budget(true) == 50us);
}

TEST_CASE("a spin that catches one wait in two keeps spinning", "[adaptive_spin]") {
    AdaptiveSpin spin(50us, 500us);
    for (int i = 0; i < 200; ++i) spin.on_spin(i % 2 == 0);
    CHECK(spin.spinning_pays());
}
