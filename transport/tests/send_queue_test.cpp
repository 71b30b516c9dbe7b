#include "testing/catch.hpp"

#include "transport/send_queue.hpp"

using pg_rdma::transport::SendQueue;

TEST_CASE("send queue signals at least every kSignalEvery work requests", "[send_queue]") {
    SendQueue sq(1024);
    int unsignalled_run = 0;
    for (int i = 0; i < 200; ++i) {
        const bool signalled = sq.must_signal(false);
        unsignalled_run = signalled ? 0 : unsignalled_run + 1;
        REQUIRE(unsignalled_run < static_cast<int>(SendQueue::kSignalEvery));
        const auto seq = sq.on_posted(signalled, 0);
        if (signalled) sq.on_completed(seq);
    }
}

TEST_CASE("send queue signals every request once half full", "[send_queue]") {
    SendQueue sq(64);
    for (int i = 0; i < 31; ++i) sq.on_posted(false, 0);
    CHECK(sq.must_signal(false));
}

TEST_CASE("a completion frees every earlier request and its staging", "[send_queue]") {
    SendQueue sq(8);
    std::uint64_t last = 0;
    for (std::uint64_t i = 0; i < 8; ++i) last = sq.on_posted(i == 7, (i + 1) * 100);
    CHECK_FALSE(sq.has_room());
    CHECK(sq.on_completed(last) == 800);
    CHECK(sq.idle());
    CHECK(sq.completed(last));
    CHECK(sq.has_room());
}

TEST_CASE("a full send queue always has a signalled request outstanding", "[send_queue]") {
    SendQueue sq(64);
    bool any_signalled = false;
    while (sq.has_room()) {
        const bool s = sq.must_signal(false);
        any_signalled = any_signalled || s;
        sq.on_posted(s, 0);
    }
    CHECK(any_signalled);
}

TEST_CASE("a request posted behind unsignalled ones in the same post counts them", "[send_queue]") {
    SendQueue sq(64);
    for (std::uint32_t i = 0; i + 2 < SendQueue::kSignalEvery; ++i) sq.on_posted(false, 0);
    CHECK_FALSE(sq.must_signal(false));
    CHECK(sq.must_signal(false, 1));  // the unsignalled WR ahead of it would end the run
    SendQueue nearly_half(8);
    nearly_half.on_posted(false, 0);
    nearly_half.on_posted(false, 0);
    CHECK_FALSE(nearly_half.must_signal(false));
    CHECK(nearly_half.must_signal(false, 1));
}

TEST_CASE("room is asked for as many requests as a message takes", "[send_queue]") {
    SendQueue sq(4);
    sq.on_posted(false, 0);
    sq.on_posted(false, 0);
    CHECK(sq.has_room(2));
    sq.on_posted(true, 0);
    CHECK(sq.has_room());
    CHECK_FALSE(sq.has_room(2));
}

TEST_CASE("forced signalling is honoured", "[send_queue]") {
    SendQueue sq(64);
    CHECK(sq.must_signal(true));
    CHECK_FALSE(sq.must_signal(false));
}

TEST_CASE("the next slot is the next sequence number modulo the depth", "[send_queue]") {
    for (const std::uint32_t depth : {4u, 7u, 64u, 100u}) {
        SendQueue sq(depth);
        for (int i = 0; i < 1000; ++i) {
            REQUIRE(sq.next_slot() == sq.slot(sq.next_seq()));
            const bool signalled = sq.must_signal(false);
            const auto seq = sq.on_posted(signalled, static_cast<std::uint64_t>(i) * 10);
            // A completion returns the staging head recorded in that WR's slot.
            if (signalled) REQUIRE(sq.on_completed(seq) == static_cast<std::uint64_t>(i) * 10);
        }
    }
}
