#include "testing/catch.hpp"

#include "transport/keepalive.hpp"

using pg_rdma::transport::KeepaliveClock;
using namespace std::chrono_literals;
using Verdict = KeepaliveClock::Verdict;

namespace {

// Drives the clock as the connection does: a check every `tick`, a probe
// whenever one is due; `answered` says whether the peer acknowledges them.
Verdict run(KeepaliveClock& k, KeepaliveClock::Clock::time_point& t, std::chrono::milliseconds tick, int ticks,
            bool answered) {
    Verdict v = Verdict::Alive;
    for (int i = 0; i < ticks; ++i) {
        t += tick;
        v = k.check(t);
        if (v == Verdict::Dead) return v;
        if (v == Verdict::SendKeepalive) {
            k.on_probe(t);
            if (answered) k.on_evidence(t);
        }
    }
    return v;
}

}  // namespace

TEST_CASE("a probe is due after an interval without sending", "[keepalive]") {
    const auto t0 = KeepaliveClock::Clock::now();
    KeepaliveClock k(100ms, 1000ms, t0);
    CHECK(k.check(t0 + 50ms) == Verdict::Alive);
    k.on_evidence(t0 + 90ms);
    CHECK(k.check(t0 + 100ms) == Verdict::SendKeepalive);
    k.on_sent(t0 + 100ms);
    CHECK(k.check(t0 + 150ms) == Verdict::Alive);
}

TEST_CASE("a peer that answers no probe is dead after the timeout", "[keepalive]") {
    const auto t0 = KeepaliveClock::Clock::now();
    KeepaliveClock k(100ms, 1000ms, t0);
    auto t = t0;
    CHECK(run(k, t, 50ms, 19, false) != Verdict::Dead);  // 950 ms
    CHECK(run(k, t, 50ms, 2, false) == Verdict::Dead);   // by 1050 ms
}

TEST_CASE("answered probes keep the peer alive indefinitely", "[keepalive]") {
    const auto t0 = KeepaliveClock::Clock::now();
    KeepaliveClock k(100ms, 1000ms, t0);
    auto t = t0;
    CHECK(run(k, t, 50ms, 1000, true) != Verdict::Dead);
}

TEST_CASE("a process that was away probes before it judges, and does not blame the peer", "[keepalive]") {
    const auto t0 = KeepaliveClock::Clock::now();
    KeepaliveClock k(100ms, 1000ms, t0);
    // Busy for a minute (a long query): the evidence is stale, but nothing
    // was asked of the peer yet.
    CHECK(k.check(t0 + 60s) == Verdict::SendKeepalive);
    k.on_probe(t0 + 60s);
    CHECK(k.check(t0 + 60s + 50ms) == Verdict::Alive);  // the probe had no chance yet
    k.on_evidence(t0 + 60s + 60ms);                      // answered
    CHECK(k.check(t0 + 60s + 500ms) != Verdict::Dead);
}

TEST_CASE("a process back from being away finds a vanished peer dead one interval after its probe", "[keepalive]") {
    const auto t0 = KeepaliveClock::Clock::now();
    KeepaliveClock k(100ms, 1000ms, t0);
    k.on_probe(t0 + 60s);
    CHECK(k.check(t0 + 60s + 99ms) == Verdict::Alive);
    CHECK(k.check(t0 + 60s + 100ms) == Verdict::Dead);
}

TEST_CASE("a process that checks in less often than the interval still finds a vanished peer dead",
          "[keepalive]") {
    // The owner polls every 150 ms with a 100 ms interval (busier than its
    // tick): the first unanswered probe starts the count.
    const auto t0 = KeepaliveClock::Clock::now();
    KeepaliveClock k(100ms, 1000ms, t0);
    auto t = t0;
    CHECK(run(k, t, 150ms, 6, false) != Verdict::Dead);  // 900 ms
    CHECK(run(k, t, 150ms, 2, false) == Verdict::Dead);  // by 1200 ms
}

TEST_CASE("sending data without probes does not make the peer dead", "[keepalive]") {
    // Unsignalled writes prove nothing either way: only an unanswered
    // probe may lead to a verdict.
    const auto t0 = KeepaliveClock::Clock::now();
    KeepaliveClock k(100ms, 1000ms, t0);
    for (auto t = t0; t < t0 + 5s; t += 50ms) {
        k.on_sent(t);
        CHECK(k.check(t) != Verdict::Dead);
    }
}
