// Liveness without the peer's cooperation, against the real rxe device: a
// peer that is alive but does not call into the transport (psql idle at its
// prompt, a backend running an hour-long query) must never be declared dead,
// and the connection must work normally once it calls in again.
#include "testing/catch.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "idle_peer.hpp"
#include "with_peer.hpp"

using namespace pg_rdma::test;

namespace {

Settings fast_keepalive() {
    Settings s;
    s.keepalive_interval = 100ms;
    s.keepalive_timeout = 1000ms;
    return s;
}

constexpr std::uint32_t kParentSeed = 0x5151;
constexpr std::uint32_t kChildSeed = 0x6262;

}  // namespace

TEST_CASE("a live peer that does not call in for twelve keepalive timeouts is not declared dead",
          "[rdma][liveness]") {
    // The reproduction: the peer accepts and sleeps without touching
    // the connection; this side waits in poll() on fd() and reads on each
    // wakeup. Before the fix it failed with ETIMEDOUT after 9.1 s at these
    // settings; here the silence lasts 12 timeouts, and this side polls
    // through the first 10 s of it.
    const Settings settings = fast_keepalive();
    check_idle_peer_survives(settings, 12s);
}

TEST_CASE("a writer blocked on a peer that does not call in stays alive, and the reserve still closes",
          "[rdma][liveness]") {
    // Credits and ring space run out while the peer sleeps: only its
    // application can give them back. Liveness must not need them.
    const Settings settings = fast_keepalive();
    constexpr std::size_t kBytes = 4 * 1024 * 1024;
    constexpr auto kSleep = 5s;  // five timeouts
    const auto sleeper = [&](Connection& conn) -> int {
        std::this_thread::sleep_for(kSleep);
        if (!read_pattern(conn, kBytes, kParentSeed)) return 1;
        return read_eof(conn) ? 0 : 2;
    };
    // Filled before the peer starts its sleep: the check below times the
    // sleep from this side, and filling 4 MiB on an emulated CPU is no
    // small part of it.
    std::vector<std::uint8_t> data(kBytes);
    fill_pattern(data.data(), data.size(), kParentSeed);
    with_peer(settings, sleeper, [&](Connection& conn, PeerProcess&) {
        std::size_t sent = 0;
        const auto start = std::chrono::steady_clock::now();
        bool blocked = false;
        while (sent < data.size()) {
            const ssize_t n = conn.write(data.data() + sent, data.size() - sent);
            if (n > 0) {
                sent += static_cast<std::size_t>(n);
                continue;
            }
            INFO("write failed after " << sent << " bytes: " << conn.failure_reason());
            REQUIRE(errno == EAGAIN);
            blocked = true;
            REQUIRE(conn.wait(POLLOUT, 30'000) > 0);
        }
        CHECK(blocked);
        // It really waited for the sleeper.
        CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(kSleep) / 2);
        CHECK(conn.stats().keepalive_probes > 10);
        CHECK(conn.close() == 0);  // the Close still had its reserved credit
    });
}

namespace {

// Writes until the transport pushes back; returns the bytes accepted.
std::uint64_t fill_until_blocked(Connection& conn, std::vector<std::uint8_t>& data) {
    std::uint64_t accepted = 0;
    for (;;) {
        const ssize_t n = conn.write(data.data(), data.size());
        if (n <= 0) return accepted;
        accepted += static_cast<std::uint64_t>(n);
    }
}

}  // namespace

TEST_CASE("a writer waiting for room is not woken by unread input", "[rdma][readiness]") {
    // A pipelined client or a backend blocked in send: input it has not read
    // yet must not make its wait for POLLOUT return (or spin). The peer
    // stalls, then reads exactly what the writer had written when it
    // blocked, so the writer's wait ends only when room really frees up.
    const Settings settings;  // default keepalive: ticks every second
    constexpr auto kStall = 2s;
    constexpr int kStalls = 2;
    Pipe written;
    const auto peer = [&](Connection& conn) -> int {
        std::uint8_t hello[4096];
        fill_pattern(hello, sizeof hello, kChildSeed);
        if (!write_all(conn, hello, sizeof hello)) return 1;
        std::vector<std::uint8_t> sink(1 << 20);
        std::uint64_t got = 0;
        for (int i = 0; i < kStalls; ++i) {
            const std::uint64_t total = written.recv_u32();  // the parent is blocked now
            std::this_thread::sleep_for(kStall);
            while (got < total) {
                const ssize_t n = conn.read(sink.data(), std::min<std::uint64_t>(sink.size(), total - got));
                if (n > 0) got += static_cast<std::uint64_t>(n);
                else if (n == 0 || errno != EAGAIN || conn.wait(POLLIN, 30'000) <= 0) return 2;
            }
        }
        return read_eof(conn) ? 0 : 3;
    };
    with_peer(settings, peer, [&](Connection& conn, PeerProcess&) {
        REQUIRE(conn.wait(POLLIN, 10'000) > 0);  // the peer's 4 KiB is here, left unread
        std::vector<std::uint8_t> data(64 * 1024);
        std::uint64_t total = fill_until_blocked(conn, data);
        REQUIRE(errno == EAGAIN);
        REQUIRE(conn.readable());
        CHECK_FALSE(conn.writable());
        written.send_u32(static_cast<std::uint32_t>(total));

        // 1. Through the wait primitive, as an interposer waits.
        auto cpu_before = cpu_seconds();
        auto start = std::chrono::steady_clock::now();
        int early = 0;  // returns without the POLLOUT it was asked for
        int rc = 0;
        while ((rc = conn.wait(POLLOUT, 20'000)) > 0 && (rc & POLLOUT) == 0) ++early;
        double wall = seconds_since(start);
        double cpu = cpu_seconds() - cpu_before;
        INFO("wait returned " << rc << " after " << wall << " s, " << cpu << " s CPU, " << early << " early");
        CHECK((rc & POLLOUT) != 0);
        CHECK(early == 0);
        CHECK(wall >= 1.0);       // it did wait for the stalled peer
        CHECK(cpu < 0.3 * wall);  // and slept meanwhile (a spin costs ~100 %)

        // 2. Through fd(), as a program waiting in its own poll(): with
        // POLLOUT as the interest, unread input does not signal it.
        REQUIRE(conn.set_interest(POLLOUT) == 0);
        total += fill_until_blocked(conn, data);
        REQUIRE(errno == EAGAIN);
        written.send_u32(static_cast<std::uint32_t>(total));
        cpu_before = cpu_seconds();
        start = std::chrono::steady_clock::now();
        int wakeups = 0;
        while (!conn.writable() && seconds_since(start) < 20) {
            pollfd p{conn.fd(), POLLIN, 0};
            poll(&p, 1, 5000);
            ++wakeups;
        }
        wall = seconds_since(start);
        cpu = cpu_seconds() - cpu_before;
        INFO(wakeups << " wakeups in " << wall << " s, " << cpu << " s CPU");
        CHECK(conn.writable());
        CHECK(wall >= 1.0);
        CHECK(wakeups < 20);  // completions and keepalive ticks only; a spin would be millions
        CHECK(cpu < 0.3 * wall);
        CHECK(conn.close() == 0);
    });
}

TEST_CASE("a reader waiting for input is not woken by keepalive ticks", "[rdma][readiness]") {
    const Settings settings = fast_keepalive();  // a tick every 50 ms
    Pipe done;
    const auto peer = [&](Connection& conn) -> int {
        done.recv_u32();
        std::uint8_t byte = 1;
        return write_all(conn, &byte, 1) && conn.close() == 0 ? 0 : 1;
    };
    with_peer(settings, peer, [&](Connection& conn, PeerProcess&) {
        const auto cpu_before = cpu_seconds();
        const auto start = std::chrono::steady_clock::now();
        CHECK(conn.wait(POLLIN, 2000) == 0);  // nothing came: a timeout, not a wakeup
        const double wall = seconds_since(start);
        CHECK(wall >= 1.9);
        CHECK(cpu_seconds() - cpu_before < 0.3 * wall);
        CHECK(conn.stats().keepalive_probes > 5);  // the ticks were handled inside
        done.send_u32(1);
        CHECK((conn.wait(POLLIN, 10'000) & POLLIN) != 0);
        std::uint8_t byte = 0;
        CHECK(conn.read(&byte, 1) == 1);
    });
}

TEST_CASE("readiness answers POLLIN, POLLOUT, POLLRDHUP and POLLHUP truthfully without I/O",
          "[rdma][readiness]") {
    Pipe step;
    const auto peer = [&](Connection& conn) -> int {
        std::uint8_t msg[10];
        fill_pattern(msg, sizeof msg, kChildSeed);
        if (!write_all(conn, msg, sizeof msg) || conn.shutdown(SHUT_WR) != 0) return 1;
        step.recv_u32();
        return conn.close() == 0 ? 0 : 2;
    };
    with_peer(Settings{}, peer, [&](Connection& conn, PeerProcess& process) {
        CHECK(conn.writable());
        CHECK(conn.write("", 0) == 0);  // a zero-length write is not "would block"
        // The peer's bytes and then its Close arrive: POLLIN and POLLRDHUP,
        // and asking does not consume anything.
        REQUIRE((conn.wait(POLLRDHUP, 10'000) & POLLRDHUP) != 0);
        CHECK(conn.peer_closed());
        CHECK(conn.readable());
        CHECK(conn.readable());
        CHECK_FALSE(conn.failed());
        CHECK((conn.poll_events(POLLIN | POLLOUT) & (POLLIN | POLLOUT)) == (POLLIN | POLLOUT));
        std::uint8_t msg[10];
        REQUIRE(read_exact(conn, msg, sizeof msg));
        CHECK(check_pattern(msg, sizeof msg, kChildSeed));
        CHECK(conn.readable());  // EOF is readable: read() says 0 at once
        std::uint8_t more = 0;
        CHECK(conn.read(&more, 1) == 0);
        // The peer disconnects: POLLHUP even though it was not asked for.
        step.send_u32(1);
        CHECK(process.wait() == 0);
        const int ev = conn.wait(0, 10'000);
        CHECK((ev & POLLHUP) != 0);
        CHECK((ev & POLLERR) == 0);
        // As over TCP: one write is taken after the peer left, the next fails.
        CHECK(conn.write("x", 1) == 1);
        CHECK(conn.write("x", 1) == -1);
        CHECK(errno == EPIPE);
    });
}

TEST_CASE("a failed connection reports POLLERR and POLLHUP, and read gives the errno", "[rdma][readiness]") {
    const Settings settings = fast_keepalive();
    Pipe port_pipe;
    PeerProcess peer([&]() -> int {
        std::string error;
        auto conn = connect_to_parent(port_pipe, settings, error);
        if (!conn) return 90;
        for (;;) pause();  // killed below
    });
    Rendezvous rendezvous(port_pipe, settings);
    auto conn = rendezvous.accept();
    peer.kill(SIGKILL);
    peer.wait();
    const int ev = conn->wait(POLLIN, 15'000);
    CHECK((ev & (POLLERR | POLLHUP | POLLIN)) == (POLLERR | POLLHUP | POLLIN));
    CHECK(conn->failed());
    std::uint8_t byte = 0;
    CHECK(conn->read(&byte, 1) == -1);
    CHECK(errno == ECONNRESET);  // the kernel disconnected for the killed process
}
