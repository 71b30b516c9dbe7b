// Failover onto TCP (stream_failover.cpp) over the in-memory Link pair, with
// a socketpair standing in for the TCP connection both ends kept: the wire
// is cut mid-stream, with bytes in flight both ways, and the stream must go
// on over the socket with every byte once and in order, or end with an
// error that names RDMA when it cannot.
#include "testing/catch.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <vector>

#include "fake_link.hpp"
#include "protocol/failover.hpp"
#include "transport/stream.hpp"

using namespace pg_rdma::test;
using namespace std::chrono_literals;
using pg_rdma::transport::Stream;

namespace {

Settings fast_keepalive() {
    Settings s;
    s.rx_buffer_size = 16 * 1024;
    s.tx_buffer_size = 8 * 1024;
    s.credits = 8;
    s.send_queue_depth = 8;
    s.keepalive_interval = 100ms;
    s.keepalive_timeout = 1000ms;
    s.keepalive_min_interval = 100ms;
    return s;
}

std::uint8_t pattern(std::uint64_t i, int stream) {
    return static_cast<std::uint8_t>(((i + static_cast<std::uint64_t>(stream) * 7919u) * 2654435761u) >> 24);
}

// Two socket ends standing in for the session's TCP connection.
struct Socket {
    int fd[2] = {-1, -1};
    Socket() { REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd) == 0); }
    ~Socket() {
        for (int f : fd)
            if (f >= 0) ::close(f);
    }
};

// One direction of the test's traffic: what was written and read so far.
struct Flow {
    Stream* from;
    Stream* to;
    int id;
    std::uint64_t sent = 0, received = 0;
    std::vector<std::uint8_t> out = std::vector<std::uint8_t>(2500);
    std::vector<std::uint8_t> in = std::vector<std::uint8_t>(3100);

    // Writes and reads what can move now; false when nothing moved. A
    // wrong byte fails the test at once.
    bool step(std::uint64_t total) {
        bool moved = false;
        if (sent < total) {
            const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(out.size(), total - sent));
            for (std::size_t i = 0; i < n; ++i) out[i] = pattern(sent + i, id);
            const iovec one{out.data(), n};
            const ssize_t w = from->writev(&one, 1);
            if (w > 0) {
                sent += static_cast<std::uint64_t>(w);
                moved = true;
            } else {
                REQUIRE(w == -1);
                REQUIRE(errno == EAGAIN);
            }
        }
        const ssize_t r = to->read(in.data(), in.size());
        if (r > 0) {
            for (ssize_t i = 0; i < r; ++i)
                REQUIRE(in[static_cast<std::size_t>(i)] == pattern(received + static_cast<std::uint64_t>(i), id));
            received += static_cast<std::uint64_t>(r);
            moved = true;
        } else {
            REQUIRE(r == -1);
            REQUIRE(errno == EAGAIN);
        }
        return moved;
    }
};

// Moves `total` bytes each way, both ends driven here, sleeping on both
// fd()s (as a program's poll would) whenever nothing moved.
void run_both(Flow& ab, Flow& ba, std::uint64_t total, std::chrono::seconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (ab.received < total || ba.received < total) {
        REQUIRE(std::chrono::steady_clock::now() < until);
        const bool moved = ab.step(total) | ba.step(total);
        if (moved) continue;
        for (Stream* s : {ab.from, ab.to}) s->set_interest(POLLIN | POLLOUT);
        pollfd fds[2] = {{ab.from->fd(), POLLIN, 0}, {ab.to->fd(), POLLIN, 0}};
        (void)poll(fds, 2, 100);
        for (Stream* s : {ab.from, ab.to}) (void)s->poll_events(POLLIN | POLLOUT);
    }
}

}  // namespace

TEST_CASE("when the queue pair fails mid-stream both ends move onto TCP and every byte arrives once, in order",
          "[stream][failover]") {
    auto s = establish(fast_keepalive(), fast_keepalive());
    REQUIRE((s->a->stats().features & pg_rdma::protocol::feature::kTcpFailover) != 0);
    Socket tcp;
    REQUIRE(s->a->attach_tcp(tcp.fd[0]));
    REQUIRE(s->b->attach_tcp(tcp.fd[1]));
    Flow ab{s->a.get(), s->b.get(), 1}, ba{s->b.get(), s->a.get(), 2};
    run_both(ab, ba, 200'000, 10s);  // over RDMA: rings and staging wrap many times
    CHECK_FALSE(s->a->failed_over());
    // The wire dies with bytes in flight both ways: written, never
    // acknowledged, so still in each end's staging buffer.
    s->pair.wire->cut = true;
    REQUIRE(ab.step(200'000 + 6'000));
    REQUIRE(ba.step(200'000 + 6'000));
    run_both(ab, ba, 600'000, 20s);
    CHECK(s->a->failed_over());
    CHECK(s->b->failed_over());
    CHECK(s->a->stats().failed_over);
    CHECK_THAT(s->a->failover_reason() + s->b->failover_reason(), testing::contains_text("keepalive"));
    // The TCP path keeps socket semantics: shutdown is the peer's EOF, after
    // every byte.
    REQUIRE(s->a->shutdown_write() == 0);
    REQUIRE((s->b->wait(POLLIN, 2000ms) & POLLIN) != 0);
    std::uint8_t byte = 0;
    CHECK(s->b->read(&byte, 1) == 0);
    CHECK(s->a->close() == 0);
}

TEST_CASE("a reader asleep on fd() when the queue pair fails wakes, and its next call continues on TCP",
          "[stream][failover]") {
    auto s = establish(fast_keepalive(), fast_keepalive());
    Socket tcp;
    REQUIRE(s->a->attach_tcp(tcp.fd[0]));
    REQUIRE(s->b->attach_tcp(tcp.fd[1]));
    s->pair.wire->cut = true;
    // b only sleeps; a's keepalive finds the wire dead and tells b on TCP.
    const auto start = std::chrono::steady_clock::now();
    const std::array<std::uint8_t, 3> hello{'h', 'i', '!'};
    const iovec one{const_cast<std::uint8_t*>(hello.data()), hello.size()};
    ssize_t w = -1;
    while (w < 0 && std::chrono::steady_clock::now() - start < 5s) {
        w = s->a->writev(&one, 1);
        if (w < 0) {
            REQUIRE(errno == EAGAIN);
            (void)s->a->wait(POLLOUT, 100ms);
        }
    }
    REQUIRE(w == 3);
    // Until b answers, a's write may only be in staging: a must keep going.
    std::array<std::uint8_t, 8> in{};
    ssize_t r = -1;
    while (r < 0 && std::chrono::steady_clock::now() - start < 8s) {
        (void)s->a->poll_events(POLLIN);
        pollfd p{s->b->fd(), POLLIN, 0};
        (void)poll(&p, 1, 50);
        r = s->b->read(in.data(), in.size());
        if (r < 0) REQUIRE(errno == EAGAIN);
    }
    REQUIRE(r == 3);
    CHECK(std::equal(hello.begin(), hello.end(), in.begin()));
    CHECK(s->a->failed_over());
    CHECK(s->b->failed_over());
}

TEST_CASE("a failover the peer never answers ends in an error that names RDMA, within the keepalive timeout",
          "[stream][failover]") {
    auto s = establish(fast_keepalive(), fast_keepalive());
    Socket tcp;
    REQUIRE(s->a->attach_tcp(tcp.fd[0]));  // b has no TCP path: it never answers
    s->pair.wire->cut = true;
    const auto start = std::chrono::steady_clock::now();
    int ev = 0;
    while ((ev & POLLERR) == 0 && std::chrono::steady_clock::now() - start < 6s) ev = s->a->wait(POLLIN, 100ms);
    CHECK((ev & (POLLERR | POLLHUP)) == (POLLERR | POLLHUP));
    // keepalive_timeout to find the wire dead, as much again for an answer.
    CHECK(std::chrono::steady_clock::now() - start < 4s);
    std::uint8_t byte = 0;
    CHECK(s->a->read(&byte, 1) == -1);
    CHECK(errno == ETIMEDOUT);
    CHECK_THAT(s->a->failure_reason(), testing::contains_text("RDMA failed") && testing::contains_text("could not move onto TCP"));
    CHECK_FALSE(s->a->failed_over());
}

TEST_CASE("a peer that closes its TCP end instead of answering ends the failover at once", "[stream][failover]") {
    auto s = establish(fast_keepalive(), fast_keepalive());
    Socket tcp;
    REQUIRE(s->a->attach_tcp(tcp.fd[0]));
    s->pair.wire->cut = true;
    ::close(tcp.fd[1]);
    tcp.fd[1] = -1;
    const auto start = std::chrono::steady_clock::now();
    int ev = 0;
    while ((ev & POLLERR) == 0 && std::chrono::steady_clock::now() - start < 6s) ev = s->a->wait(POLLIN, 100ms);
    CHECK((ev & POLLERR) != 0);
    std::uint8_t byte = 0;
    CHECK(s->a->read(&byte, 1) == -1);
    CHECK(errno == ETIMEDOUT);  // the keepalive's verdict: no TCP to move onto
    CHECK_FALSE(s->a->failed_over());
}

TEST_CASE("a normal close is not taken for a failover, and the peer's socket end is then forgotten",
          "[stream][failover]") {
    auto s = establish(fast_keepalive(), fast_keepalive());
    Socket tcp;
    REQUIRE(s->a->attach_tcp(tcp.fd[0]));
    REQUIRE(s->b->attach_tcp(tcp.fd[1]));
    const std::array<std::uint8_t, 2> bye{'o', 'k'};
    const iovec one{const_cast<std::uint8_t*>(bye.data()), bye.size()};
    REQUIRE(s->b->writev(&one, 1) == 2);
    REQUIRE(s->b->close() == 0);
    ::close(tcp.fd[1]);  // as the client library and a backend's exit do after close
    tcp.fd[1] = -1;
    std::array<std::uint8_t, 4> in{};
    REQUIRE((s->a->wait(POLLIN, 1000ms) & POLLIN) != 0);
    CHECK(s->a->read(in.data(), in.size()) == 2);
    CHECK(s->a->read(in.data(), in.size()) == 0);
    CHECK_FALSE(s->a->failed_over());
    // fd() does not stay readable for the socket's EOF: after a look that
    // takes every event in, a reader's fd() is quiet.
    s->a->set_interest(POLLOUT);
    (void)s->a->poll_events(POLLOUT);
    s->a->set_interest(POLLRDHUP);
    pollfd p{s->a->fd(), POLLIN, 0};
    CHECK(poll(&p, 1, 200) == 1);  // the peer's Close and EOF: ready, truthfully
    CHECK(s->a->failure_reason().empty());
}

TEST_CASE("bytes whose post the device refused are resent once by the failover, never written twice",
          "[stream][failover]") {
    auto s = establish(fast_keepalive(), fast_keepalive());
    Socket tcp;
    REQUIRE(s->a->attach_tcp(tcp.fd[0]));
    REQUIRE(s->b->attach_tcp(tcp.fd[1]));
    Flow ab{s->a.get(), s->b.get(), 1}, ba{s->b.get(), s->a.get(), 2};
    run_both(ab, ba, 50'000, 10s);
    // The next writes' posts fail (a device going away): MSG_MORE writes
    // and pieces that meet the staging buffer's end take post_data's way.
    s->pair.wire->refuse_posts = true;
    std::vector<std::uint8_t> out(3000);
    std::uint64_t more_sent = 0;
    for (int i = 0; i < 4; ++i) {
        for (std::size_t k = 0; k < out.size(); ++k) out[k] = pattern(ab.sent + k, 1);
        const iovec one{out.data(), out.size()};
        const ssize_t w = s->a->writev(&one, 1, true);
        if (w <= 0) break;
        ab.sent += static_cast<std::uint64_t>(w);
        more_sent += static_cast<std::uint64_t>(w);
    }
    CHECK(more_sent > 0);
    run_both(ab, ba, 120'000, 20s);  // a wrong or repeated byte fails inside
    CHECK(s->a->failed_over());
    CHECK(s->b->failed_over());
}
