// When to send a Keepalive and when the peer counts as dead.
//
// Evidence that the peer lives: any message from it, or the completion of a
// message we sent (an RC completion means the peer's queue pair acknowledged
// it, which a dead process or host cannot do). This is TCP keepalive's rule:
// a peer busy in a long query, or not reading, is alive; a vanished one is not.
//
// The clock only advances when the owning process runs the connection. A
// process that was away (a backend executing a long query does not poll its
// socket) cannot judge the peer on stale evidence, so a gap longer than the
// interval restarts the count from "now" and sends a probe.
#pragma once

#include <chrono>

namespace pg_rdma::transport {

class KeepaliveClock {
public:
    using Clock = std::chrono::steady_clock;
    using Duration = Clock::duration;

    KeepaliveClock(Duration interval, Duration timeout, Clock::time_point now)
        : interval_(interval), timeout_(timeout), last_evidence_(now), last_sent_(now),
          last_checked_(now) {}

    void on_evidence(Clock::time_point now) { last_evidence_ = now; }
    void on_sent(Clock::time_point now) { last_sent_ = now; }

    enum class Verdict { Alive, SendKeepalive, Dead };

    Verdict check(Clock::time_point now) {
        if (now - last_checked_ > interval_) last_evidence_ = now;  // we were away
        last_checked_ = now;
        if (now - last_evidence_ >= timeout_) return Verdict::Dead;
        if (now - last_sent_ >= interval_) return Verdict::SendKeepalive;
        return Verdict::Alive;
    }

    void set(Duration interval, Duration timeout) {
        interval_ = interval;
        timeout_ = timeout;
    }

private:
    Duration interval_;
    Duration timeout_;
    Clock::time_point last_evidence_;
    Clock::time_point last_sent_;
    Clock::time_point last_checked_;
};

}  // namespace pg_rdma::transport
