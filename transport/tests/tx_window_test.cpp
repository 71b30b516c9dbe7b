#include "testing/catch.hpp"

#include <algorithm>
#include <cstdint>

#include "transport/tx_window.hpp"

using pg_rdma::transport::PeerRingWindow;
using pg_rdma::transport::TxStaging;
using pg_rdma::transport::first_piece;

TEST_CASE("peer window shrinks as bytes are written and grows with CreditUpdates", "[tx_window]") {
    PeerRingWindow w;
    w.reset(4096);
    CHECK(w.writable_contiguous() == 4096);
    w.on_written(3000);
    CHECK(w.writable_contiguous() == 1096);
    REQUIRE(w.on_peer_consumed(2000));
    // 3096 free in all, but only 1096 before the ring's end.
    CHECK(w.writable_contiguous() == 1096);
    w.on_written(1096);
    CHECK(w.write_offset() == 0);
    CHECK(w.writable_contiguous() == 2000);
}

TEST_CASE("peer window across the ring's end: all free bytes, and the part before the end", "[tx_window]") {
    PeerRingWindow w;
    w.reset(4096);
    w.on_written(3000);
    REQUIRE(w.on_peer_consumed(2000));
    CHECK(w.writable() == 3096);  // 1096 before the end, 2000 from the start
    CHECK(w.before_end(3096) == 1096);
    CHECK(w.before_end(500) == 500);
    w.on_written(3096);
    CHECK(w.write_offset() == 2000);
    CHECK(w.writable() == 0);
    CHECK(w.before_end(1) == 1);
}

TEST_CASE("peer window rejects CreditUpdates that go backwards or overshoot", "[tx_window]") {
    PeerRingWindow w;
    w.reset(4096);
    w.on_written(100);
    REQUIRE(w.on_peer_consumed(50));
    CHECK_FALSE(w.on_peer_consumed(49));   // backwards
    CHECK_FALSE(w.on_peer_consumed(101));  // more than ever written
    CHECK(w.on_peer_consumed(100));
}

TEST_CASE("peer window of an unknown ring allows nothing", "[tx_window]") {
    PeerRingWindow w;
    CHECK(w.writable_contiguous() == 0);
    CHECK(w.writable() == 0);
}

TEST_CASE("staging hands out contiguous space and frees it in order", "[tx_window]") {
    TxStaging s(1000);
    CHECK(s.contiguous_free(600) == 600);
    s.fill(600);
    CHECK(s.contiguous_free(600) == 400);
    s.fill(400);
    CHECK(s.contiguous_free(1) == 0);
    s.release_to(300);
    CHECK(s.offset() == 0);
    CHECK(s.contiguous_free(1000) == 300);
    s.release_to(200);  // stale completion: nothing changes
    CHECK(s.in_use() == 700);
}

TEST_CASE("staging's free space runs past its end to its start, and frees in order", "[tx_window]") {
    TxStaging s(1000);
    s.fill(700);
    s.release_to(600);  // 100 in use, from 600 to 700
    CHECK(s.contiguous_free(900) == 300);
    CHECK(s.free_space(2000) == 900);  // 300 to the end, 600 from the start
    s.fill(900);
    CHECK(s.offset() == 600);
    CHECK(s.offset_before(900) == 700);  // those bytes begin before the end
    CHECK(s.free_space(1) == 0);
    s.release_to(1600);
    CHECK(s.free_space(1000) == 1000);
}

TEST_CASE("a write's first piece runs to the staging buffer's end, the rest from its start", "[tx_window]") {
    CHECK(first_piece(0, 1000, 1000) == 1000);   // the whole buffer: one piece
    CHECK(first_piece(600, 300, 1000) == 300);   // inside: one piece
    CHECK(first_piece(600, 400, 1000) == 400);   // up to the end exactly: one piece
    CHECK(first_piece(600, 900, 1000) == 400);   // 400 to the end, 500 from the start
    CHECK(first_piece(999, 1000, 1000) == 1);    // never an empty first piece
}

TEST_CASE("staging says where the bytes filled last begin, also when they end at the buffer's end", "[tx_window]") {
    TxStaging s(1000);
    s.fill(300);
    CHECK(s.offset_before(300) == 0);
    CHECK(s.offset_before(100) == 200);
    s.fill(700);  // up to the end: the next fill starts at 0
    CHECK(s.offset() == 0);
    CHECK(s.offset_before(700) == 300);
    CHECK(s.offset_before(0) == 0);
}

TEST_CASE("positions kept beside the counters are the counters modulo the size, over many wraps", "[tx_window]") {
    // An odd size, so no power-of-two shortcut could pass by accident.
    constexpr std::uint32_t kSize = 4096 * 3 + 4;
    PeerRingWindow w;
    w.reset(kSize);
    TxStaging s(kSize);
    std::uint32_t step = 1;
    for (int i = 0; i < 20'000; ++i) {
        step = step * 1103515245u + 12345u;
        const std::uint32_t want = 1 + (step >> 8) % 5000;
        const std::uint32_t n = std::min(w.writable_contiguous(), s.contiguous_free(want));
        if (n == 0) {
            REQUIRE(w.on_peer_consumed(w.written()));
            s.release_to(s.head());
            continue;
        }
        w.on_written(n);
        s.fill(n);
        REQUIRE(w.write_offset() == w.written() % kSize);
        REQUIRE(s.offset() == s.head() % kSize);
        REQUIRE(s.offset_before(n) == (s.head() - n) % kSize);
    }
}
