// Settings are checked where a connection is created: every field that
// could break the data path (a zero-sized buffer divides by zero, a
// one-slot send queue never signals) is refused with a sentence.
#include "testing/catch.hpp"

#include "transport/settings.hpp"

using namespace pg_rdma::transport;
using namespace std::chrono_literals;

namespace {

std::string problem_with(void (*change)(Settings&)) {
    Settings s;
    change(s);
    return std::string(settings_problem(s));
}

}  // namespace

TEST_CASE("the default settings are valid", "[settings]") { CHECK(settings_problem(Settings{}).empty()); }

TEST_CASE("buffer sizes that would break the rings are refused", "[settings]") {
    CHECK_THAT(problem_with([](Settings& s) { s.tx_buffer_size = 0; }), testing::contains_text("tx_buffer_size"));
    CHECK_THAT(problem_with([](Settings& s) { s.rx_buffer_size = 0; }), testing::contains_text("rx_buffer_size"));
    CHECK_THAT(problem_with([](Settings& s) { s.rx_buffer_size = 4096 + 1; }), testing::contains_text("multiple of 4 KiB"));
    CHECK_THAT(problem_with([](Settings& s) { s.rx_buffer_size = 128u * 1024 * 1024; }),
               testing::contains_text("rx_buffer_size"));
}

TEST_CASE("queue depths outside what credits and signalling need are refused", "[settings]") {
    CHECK_THAT(problem_with([](Settings& s) { s.credits = 0; }), testing::contains_text("credits"));
    CHECK_THAT(problem_with([](Settings& s) { s.credits = 3; }), testing::contains_text("credits"));
    CHECK_THAT(problem_with([](Settings& s) { s.send_queue_depth = 1; }), testing::contains_text("send_queue_depth"));
    CHECK(problem_with([](Settings& s) { s.send_queue_depth = 4; }).empty());
}

TEST_CASE("inline writes can be turned off but not made larger than 1 KiB", "[settings]") {
    CHECK(problem_with([](Settings& s) { s.max_inline = 0; }).empty());
    CHECK(problem_with([](Settings& s) { s.max_inline = kMaxInline; }).empty());
    CHECK_THAT(problem_with([](Settings& s) { s.max_inline = kMaxInline + 1; }), testing::contains_text("max_inline"));
}

TEST_CASE("keepalive values outside the protocol's ranges or inconsistent ones are refused", "[settings]") {
    CHECK_THAT(problem_with([](Settings& s) { s.keepalive_interval = 5ms; }), testing::contains_text("keepalive_interval"));
    CHECK_THAT(problem_with([](Settings& s) { s.keepalive_timeout = s.keepalive_interval; }),
               testing::contains_text("twice"));
    CHECK_THAT(problem_with([](Settings& s) { s.keepalive_timeout = 25h; }), testing::contains_text("24 h"));
    CHECK_THAT(problem_with([](Settings& s) { s.keepalive_min_interval = 5ms; }),
               testing::contains_text("keepalive_min_interval"));
    CHECK_THAT(problem_with([](Settings& s) { s.keepalive_max_timeout = 25h; }),
               testing::contains_text("keepalive_max_timeout"));
}

TEST_CASE("this side's own keepalive values widen its negotiation bounds", "[settings]") {
    Settings s;
    s.keepalive_interval = 100ms;  // shorter than the 1 s floor it imposes on peers
    s.keepalive_timeout = 30min;   // longer than the 10 min cap
    CHECK(settings_problem(s).empty());
    const auto b = keepalive_bounds(s);
    CHECK(b.min_interval_ms == 100);
    CHECK(b.max_timeout_ms == 30 * 60 * 1000);
    CHECK(pg_rdma::protocol::validate_bounds(b).empty());
    CHECK(pg_rdma::protocol::validate_bounds(keepalive_bounds(Settings{})).empty());
}

TEST_CASE("timeouts and spin budgets that make no sense are refused", "[settings]") {
    CHECK_THAT(problem_with([](Settings& s) { s.connect_timeout = 0ms; }), testing::contains_text("connect_timeout"));
    CHECK_THAT(problem_with([](Settings& s) { s.close_drain_timeout = -1ms; }), testing::contains_text("close_drain"));
    CHECK_THAT(problem_with([](Settings& s) { s.busy_poll_max = 1s; }), testing::contains_text("busy_poll"));
    CHECK_THAT(problem_with([](Settings& s) { s.busy_poll = 600us; }), testing::contains_text("busy_poll"));
    CHECK(problem_with([](Settings& s) { s.busy_poll = 0us; }).empty());
}

TEST_CASE("a refused inline size steps down by halves to none", "[settings]") {
    CHECK(next_inline_ask(1024) == 512);
    CHECK(next_inline_ask(512) == 256);
    CHECK(next_inline_ask(100) == 50);
    CHECK(next_inline_ask(2 * kMinInlineAsk) == kMinInlineAsk);
    CHECK(next_inline_ask(2 * kMinInlineAsk - 1) == 0);
    CHECK(next_inline_ask(kMinInlineAsk) == 0);
    CHECK(next_inline_ask(0) == 0);
    // The ladder from any size ends at none within a few asks.
    int asks = 0;
    for (std::uint32_t ask = kMaxInline; ask != 0; ask = next_inline_ask(ask)) ++asks;
    CHECK(asks == 6);  // 1024, 512, 256, 128, 64, 32
}

