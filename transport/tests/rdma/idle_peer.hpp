// The idle-peer scenario shared by the short liveness test and the
// 3-minute one with default settings: a peer that connects and then does
// not touch the connection at all for `idle`, while this side waits in
// poll() on fd() and calls read() on every wakeup (as psql's server does
// while the client sits at its prompt). Afterwards both directions must
// work normally.
#pragma once

#include "testing/catch.hpp"

#include <poll.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

#include "with_peer.hpp"

namespace pg_rdma::test {

// CPU time (user + system) this process has used so far.
inline double cpu_seconds() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

inline double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline void check_idle_peer_survives(const Settings& settings, std::chrono::seconds idle) {
    constexpr std::uint64_t kBytes = 1024 * 1024;  // more than a ring: credits must flow again
    constexpr std::uint32_t kToPeer = 0x7171, kFromPeer = 0x8282;
    const auto sleeper = [&](Connection& conn) -> int {
        std::this_thread::sleep_for(idle);  // alive, connected, not calling in
        std::string why;
        if (!exchange(conn, kBytes, kFromPeer, kBytes, kToPeer, why)) {
            std::fprintf(stderr, "peer after its sleep: %s (%s)\n", why.c_str(), conn.failure_reason().c_str());
            return 1;
        }
        return conn.close() == 0 ? 0 : 2;
    };
    with_peer(settings, sleeper, [&](Connection& conn, PeerProcess&) {
        // The peer's sleep began before `start`, so this side's last read
        // must come well before `start + idle`: each poll ends by `quiet_until`
        // (a poll of a whole second, ending at the next keepalive tick, once
        // read at the very moment the peer woke and wrote).
        constexpr auto kBeforeWake = std::chrono::seconds(2);
        constexpr int kPollMs = 1000;
        const auto start = std::chrono::steady_clock::now();
        const auto quiet_until = start + idle - kBeforeWake;
        int wakeups = 0;
        while (std::chrono::steady_clock::now() < quiet_until) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                quiet_until - std::chrono::steady_clock::now());
            pollfd p{conn.fd(), POLLIN, 0};
            poll(&p, 1, static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, kPollMs)));
            ++wakeups;
            std::uint8_t byte = 0;
            const ssize_t n = conn.read(&byte, 1);
            INFO("after " << seconds_since(start) << " s: read " << n << ", " << conn.failure_reason());
            REQUIRE(n == -1);
            REQUIRE(errno == EAGAIN);
        }
        INFO("idle for " << seconds_since(start) << " s with " << wakeups << " wakeups, "
                         << conn.stats().keepalive_probes << " probes");
        CHECK(conn.stats().keepalive_probes > 2);
        std::string why;
        CHECK(exchange(conn, kBytes, kToPeer, kBytes, kFromPeer, why));
        INFO(why);
        CHECK(read_eof(conn));
    });
}

}  // namespace pg_rdma::test
