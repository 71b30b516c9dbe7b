#include "testing/catch.hpp"

#include <algorithm>
#include <cstdint>

#include "transport/rx_ring.hpp"

using pg_rdma::transport::RxRing;

TEST_CASE("rx ring accepts writes up to its size and delivers them in order", "[rx_ring]") {
    RxRing ring(4096);
    REQUIRE(ring.on_write(1000, false));
    REQUIRE(ring.on_write(3096, false));
    CHECK(ring.unread() == 4096);
    CHECK(ring.contiguous_unread() == 4096);
    CHECK_FALSE(ring.on_write(1, false));  // full: an honest peer would have waited
    ring.consume(100);
    CHECK(ring.read_offset() == 100);
    CHECK(ring.unread() == 3996);
}

TEST_CASE("rx ring rejects empty writes and writes crossing the end", "[rx_ring]") {
    RxRing ring(4096);
    CHECK_FALSE(ring.on_write(0, false));
    REQUIRE(ring.on_write(4000, false));
    ring.consume(4000);
    CHECK_FALSE(ring.on_write(97, false));  // 4000 + 97 crosses 4096
    CHECK(ring.on_write(96, false));
    CHECK(ring.write_offset() == 0);
    CHECK(ring.on_write(100, false));
}

TEST_CASE("rx ring takes a write across the end only where the peers agreed on it", "[rx_ring]") {
    RxRing ring(4096);
    REQUIRE(ring.on_write(4000, true));
    ring.consume(4000);
    CHECK_FALSE(ring.on_write(97, false));
    REQUIRE(ring.on_write(200, true));  // 96 at the end, 104 from the start
    CHECK(ring.write_offset() == 104);
    CHECK(ring.contiguous_unread() == 96);
    ring.consume(96);
    CHECK(ring.contiguous_unread() == 104);
    CHECK_FALSE(ring.on_write(4096 - 104 + 1, true));  // still never past unread bytes
    CHECK(ring.on_write(4096 - 104, true));
}

TEST_CASE("rx ring readable region wraps in two pieces", "[rx_ring]") {
    RxRing ring(4096);
    REQUIRE(ring.on_write(4096, false));
    ring.consume(4000);
    REQUIRE(ring.on_write(50, false));
    CHECK(ring.unread() == 146);
    CHECK(ring.contiguous_unread() == 96);  // up to the end first
    ring.consume(96);
    CHECK(ring.read_offset() == 0);
    CHECK(ring.contiguous_unread() == 50);
}

TEST_CASE("rx ring announces consumption every half ring, cumulatively", "[rx_ring]") {
    RxRing ring(4096);
    REQUIRE(ring.on_write(4096, false));
    ring.consume(2047);
    CHECK_FALSE(ring.announce_due());
    ring.consume(1);
    REQUIRE(ring.announce_due());
    CHECK(ring.take_announcement() == 2048);
    CHECK_FALSE(ring.announce_due());
    ring.consume(2048);
    REQUIRE(ring.announce_due());
    CHECK(ring.take_announcement() == 4096);
}

TEST_CASE("rx ring never consumes more than was written", "[rx_ring]") {
    RxRing ring(8192);
    REQUIRE(ring.on_write(10, false));
    ring.consume(100);
    CHECK(ring.consumed() == 10);
    CHECK(ring.unread() == 0);
}

TEST_CASE("rx ring positions are the counters modulo the size, over many wraps", "[rx_ring]") {
    constexpr std::uint32_t kSize = 4096 * 3;  // not a power of two
    const bool across = GENERATE(false, true);
    RxRing ring(kSize);
    std::uint32_t step = 7;
    for (int i = 0; i < 20'000; ++i) {
        step = step * 1103515245u + 12345u;
        const std::uint32_t len = 1 + (step >> 8) % 5000;
        const auto room = static_cast<std::uint32_t>(
            std::min<std::uint64_t>(kSize - ring.unread(), across ? kSize : kSize - ring.write_offset()));
        if (room > 0) REQUIRE(ring.on_write(std::min(len, room), across));
        ring.consume((step >> 4) % 6000);  // straddles the end at times
        REQUIRE(ring.write_offset() == ring.produced() % kSize);
        REQUIRE(ring.read_offset() == ring.consumed() % kSize);
    }
}
