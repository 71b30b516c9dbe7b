#include <catch2/catch.hpp>

#include "transport/tx_window.hpp"

using pg_rdma::transport::PeerRingWindow;
using pg_rdma::transport::TxStaging;

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
