// When to probe the peer and when it counts as dead.
//
// Evidence that the peer lives: any message from it, or the completion of
// a message we sent (an RC completion means the peer's device acknowledged
// it, which a vanished host cannot do). This is TCP keepalive's rule: a peer
// busy in a long query, or not reading, is alive; a vanished one is not.
//
// Dead needs both: nothing proved the peer alive for `timeout`, and a probe
// we sent has gone unanswered for at least `interval`. The second condition
// is what makes the verdict fair to a process that was away (a backend
// executing an hour-long query does not poll its connection): coming back,
// its evidence is stale, but it has not asked the peer yet; it probes, and
// judges only once the probe had its chance. It also holds for a process
// that checks in less often than the interval: the first probe after the
// last evidence starts the count, not the check.
//
// The owner reports sends and evidence as they happened (the data path only
// raises flags; the clock is read once a tick), and probes separately:
// only a probe is certain to be acknowledged or to fail, since data writes
// are mostly unsignalled.
#pragma once

#include <chrono>

namespace pg_rdma::transport {

class KeepaliveClock {
public:
    using Clock = std::chrono::steady_clock;
    using Duration = Clock::duration;

    KeepaliveClock(Duration interval, Duration timeout, Clock::time_point now)
        : interval_(interval), timeout_(timeout), last_evidence_(now), last_sent_(now) {}

    void on_evidence(Clock::time_point now) {
        last_evidence_ = now;
        probe_unanswered_ = false;
    }
    // Anything sent: no probe is needed while we are talking anyway.
    void on_sent(Clock::time_point now) { last_sent_ = now; }
    // A probe went out (on_sent too).
    void on_probe(Clock::time_point now) {
        on_sent(now);
        if (!probe_unanswered_) first_unanswered_probe_ = now;
        probe_unanswered_ = true;
    }

    enum class Verdict { Alive, SendKeepalive, Dead };

    [[nodiscard]] Verdict check(Clock::time_point now) const {
        if (now - last_evidence_ >= timeout_ && probe_unanswered_ && now - first_unanswered_probe_ >= interval_)
            return Verdict::Dead;
        // No evidence for a while and no probe out yet (just back from
        // being away, say): ask now rather than after a full interval.
        if (now - last_sent_ >= interval_ || (now - last_evidence_ >= timeout_ && !probe_unanswered_))
            return Verdict::SendKeepalive;
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
    bool probe_unanswered_ = false;            // a probe went out since the last evidence
    Clock::time_point first_unanswered_probe_;  // ... the first of them (if so)
};

}  // namespace pg_rdma::transport
