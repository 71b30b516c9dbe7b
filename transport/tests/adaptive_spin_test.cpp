#include <catch2/catch.hpp>

#include "transport/adaptive_spin.hpp"

using pg_rdma::transport::AdaptiveSpin;
using namespace std::chrono_literals;

TEST_CASE("a new connection spins only the base time", "[adaptive_spin]") {
    const AdaptiveSpin spin(50us, 500us);
    CHECK(spin.budget() == 50us);
}

TEST_CASE("short request-response waits raise the spin to catch the answer", "[adaptive_spin]") {
    AdaptiveSpin spin(50us, 500us);
    for (int i = 0; i < 100; ++i) spin.on_wait(200us);
    CHECK(spin.budget() >= 290us);
    CHECK(spin.budget() <= 310us);  // 1.5 x 200 us
}

TEST_CASE("the spin never exceeds its maximum nor drops below its base", "[adaptive_spin]") {
    AdaptiveSpin spin(50us, 500us);
    for (int i = 0; i < 100; ++i) spin.on_wait(400us);
    CHECK(spin.budget() == 500us);  // 600 us wanted, capped
    for (int i = 0; i < 100; ++i) spin.on_wait(5us);
    CHECK(spin.budget() == 50us);
}

TEST_CASE("long waits such as an idle session fall back to the base spin", "[adaptive_spin]") {
    AdaptiveSpin spin(50us, 500us);
    for (int i = 0; i < 100; ++i) spin.on_wait(200us);
    REQUIRE(spin.budget() > 50us);
    for (int i = 0; i < 100; ++i) spin.on_wait(2s);
    CHECK(spin.budget() == 50us);
}
