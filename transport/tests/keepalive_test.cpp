#include <catch2/catch.hpp>

#include "transport/keepalive.hpp"

using pg_rdma::transport::KeepaliveClock;
using namespace std::chrono_literals;
using Verdict = KeepaliveClock::Verdict;

TEST_CASE("keepalive is due after an interval without sending", "[keepalive]") {
    const auto t0 = KeepaliveClock::Clock::now();
    KeepaliveClock k(100ms, 1000ms, t0);
    CHECK(k.check(t0 + 50ms) == Verdict::Alive);
    k.on_evidence(t0 + 90ms);
    CHECK(k.check(t0 + 100ms) == Verdict::SendKeepalive);
    k.on_sent(t0 + 100ms);
    CHECK(k.check(t0 + 150ms) == Verdict::Alive);
}

TEST_CASE("a peer without evidence for the timeout is dead", "[keepalive]") {
    const auto t0 = KeepaliveClock::Clock::now();
    KeepaliveClock k(100ms, 1000ms, t0);
    auto t = t0;
    for (int i = 0; i < 19; ++i) {  // checked every 50 ms, as the timer does
        t += 50ms;
        k.on_sent(t);
        REQUIRE(k.check(t) != Verdict::Dead);
    }
    t += 50ms;
    CHECK(k.check(t) == Verdict::Dead);
}

TEST_CASE("evidence keeps the peer alive", "[keepalive]") {
    const auto t0 = KeepaliveClock::Clock::now();
    KeepaliveClock k(100ms, 1000ms, t0);
    auto t = t0;
    for (int i = 0; i < 100; ++i) {
        t += 50ms;
        k.on_evidence(t);
        REQUIRE(k.check(t) != Verdict::Dead);
    }
}

TEST_CASE("a process that was away does not blame the peer for it", "[keepalive]") {
    const auto t0 = KeepaliveClock::Clock::now();
    KeepaliveClock k(100ms, 1000ms, t0);
    // Busy for a minute (a long query): the first check afterwards restarts
    // the count and asks for a probe instead of declaring the peer dead.
    CHECK(k.check(t0 + 60s) == Verdict::SendKeepalive);
    k.on_sent(t0 + 60s);
    CHECK(k.check(t0 + 60s + 50ms) == Verdict::Alive);
    auto t = t0 + 60s;
    for (int i = 0; i < 19; ++i) {
        t += 50ms;
        k.on_sent(t);
        REQUIRE(k.check(t) != Verdict::Dead);
    }
    t += 50ms;
    CHECK(k.check(t) == Verdict::Dead);
}
