// Not a test: the instructions pg_rdma's own code spends per message, for
// `scripts/bench transport` (perf/stream-cost.sh runs this under callgrind,
// which counts instructions: the same figure on any machine, busy or not).
//
// Two Connections over the in-memory link (fake_link.hpp) ping-pong `size`
// bytes as transport_bench's latency phase does on each side: write, a
// read that finds nothing, wait() (its spin finds the reply at once here),
// then reads. Through Connection, as every caller goes: its per-call claim
// is part of each message's cost. Only measured_round_trips() is counted (callgrind
// --toggle-collect), and the script keeps the functions of namespace
// pg_rdma::transport, so neither the link nor this driver is in the
// figure. A real device's verbs calls are not either: they are the same
// for every program over the device. Prints how many messages it measured.
#include "testing/catch.hpp"

#include <poll.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

#include "fake_link.hpp"
#include "transport/connection.hpp"
#include "transport/stream.hpp"

using namespace pg_rdma::test;
using pg_rdma::transport::Connection;
using pg_rdma::transport::Stream;

namespace {

constexpr int kWarmupRoundTrips = 200;
constexpr int kMeasuredRoundTrips = 1000;
constexpr int kWaitLimitMs = 1000;

void expect(bool ok, const char* what) {
    if (!ok) throw std::runtime_error(what);
}

void send_all(Connection& s, const std::vector<std::uint8_t>& buf) {
    const iovec one{const_cast<std::uint8_t*>(buf.data()), buf.size()};
    expect(s.writev(&one, 1) == static_cast<ssize_t>(buf.size()), "write");
}

// The reply was awaited: the reader's last read said EAGAIN, so it waits
// (the spin finds the reply at once here) and then reads all of it.
void await_all(Connection& s, std::vector<std::uint8_t>& buf) {
    for (std::size_t got = 0; got < buf.size();) {
        expect((s.wait(POLLIN, kWaitLimitMs) & POLLIN) != 0, "wait");
        while (got < buf.size()) {
            const ssize_t n = s.read(buf.data() + got, buf.size() - got);
            if (n < 0) {
                expect(errno == EAGAIN, "read");
                break;
            }
            expect(n > 0, "read");
            got += static_cast<std::size_t>(n);
        }
    }
}

void expect_nothing_yet(Connection& s, std::vector<std::uint8_t>& buf) {
    expect(s.read(buf.data(), buf.size()) < 0 && errno == EAGAIN, "a read before the peer wrote");
}

// One side asks, the other echoes, as transport_bench's ping-pong: each
// side reads right after it wrote, finds nothing, and waits (the server's
// read before the first request is made before the loop).
void round_trip(Connection& client, Connection& server, std::vector<std::uint8_t>& a, std::vector<std::uint8_t>& b) {
    send_all(client, a);
    expect_nothing_yet(client, a);
    await_all(server, b);
    send_all(server, b);
    expect_nothing_yet(server, b);
    await_all(client, a);
}

__attribute__((noinline)) void measured_round_trips(Connection& client, Connection& server, std::vector<std::uint8_t>& a,
                                                    std::vector<std::uint8_t>& b) {
    for (int i = 0; i < kMeasuredRoundTrips; ++i) round_trip(client, server, a, b);
}

// As after the first sleep of a real connection: the CQ was armed, fired,
// and its event taken, so a wait that catches input by spinning arms nothing.
void settle(Stream& side, Stream& peer) {
    std::uint8_t byte = 1;
    for (int i = 0; i < 2; ++i) expect(side.read(&byte, 1) < 0, "empty read");
    const iovec one{&byte, 1};
    expect(peer.writev(&one, 1) == 1, "settling write");
    expect((side.poll_events(POLLIN) & POLLIN) != 0, "settling poll");
    expect(side.read(&byte, 1) == 1, "settling read");
}

}  // namespace

TEST_CASE("stream cost: a ping-pong of STREAM_COST_SIZE bytes", "[.cost]") {
    const char* size_text = std::getenv("STREAM_COST_SIZE");
    const std::size_t size = size_text != nullptr ? std::strtoul(size_text, nullptr, 10) : 64;
    REQUIRE(size > 0);
    auto s = establish();
    settle(*s->a, *s->b);
    settle(*s->b, *s->a);
    Connection client(std::move(s->a));
    Connection server(std::move(s->b));
    std::vector<std::uint8_t> a(size, 0x5a), b(size);
    expect_nothing_yet(server, b);
    for (int i = 0; i < kWarmupRoundTrips; ++i) round_trip(client, server, a, b);
    measured_round_trips(client, server, a, b);
    CHECK(b == a);
    std::printf("messages=%d\n", 2 * kMeasuredRoundTrips);
}
