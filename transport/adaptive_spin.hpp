// How long wait() busy-polls before the caller sleeps.
//
// Sleeping costs a wakeup (interrupt, scheduler, epoll) that can exceed the
// round trip itself; spinning costs CPU. Two things decide the spin:
//
// How long. Only a wait for a reply (input awaited after sending) adapts:
// its waits feed on_wait() (a smoothed average, and an estimate of their
// tail), and
//   - short waits (a request/response exchange): spin 1.5 x the average or
//     the tail estimate, whichever is longer, at least `base`, at most
//     `max`, so the answer is caught without a wakeup. The tail matters
//     where replies are spread out (a busy or emulated host: in the TCG
//     guest the 64 B round trip's p99 was 5-10 x its median): 1.5 x the
//     average let 1.5-6 % of replies come after the spin, each costing a
//     wakeup far dearer than the spin it saved. The estimate is a
//     stochastic quantile: it rises by 1/kTailRise of itself when a reply
//     came later than it and falls by 1/kTailFall when one came sooner,
//     so it settles where about 1 reply in 120 comes later (the rises
//     balance the falls: ln 1.5 x p = -ln(1 - 1/300) x (1 - p)), and
//     halves in about 200 waits once the late replies stop. It needs only
//     whether a reply came after it, which a wait that slept also knows,
//     but only a wait that ended within `max` proves that a spin up to
//     `max` would have caught its reply: one that slept and ended later
//     may have had its reply after `max` (a client that works a
//     millisecond between statements) or just after the spin with a slow
//     wakeup, and counting it would hold the spin at `max` for replies no
//     spin catches. Such waits leave the estimate alone (so it errs
//     short), as do longer ones (think time); the average handles them;
//   - waits longer than `max` (an idle session, think time): spin only
//     `base`, since spinning longer would burn CPU and still end in a sleep.
//   A wait that slept measured the reply plus the wakeup, which costs tens
//   of microseconds on a host and hundreds under emulation. Replies that
//   come just after `max` would then average above it for good: each one
//   sleeps because the spin dropped to `base`, and its wakeup keeps the
//   average up. So a wait that slept after a spin shorter than `max` (the
//   base one, or none) and took at most 2 x `max` counts as a reply a
//   spin of `max` would have caught (2/3 of `max`, whose 1.5 x is `max`):
//   the next spin tries the maximum. One that slept after spinning `max`
//   counts as measured, so replies that really take longer still drop the
//   spin to `base`, and its misses close the gate below. Samples count at
//   most 4 x `max`: enough to say "longer than max", and one long idle
//   wait does not keep the spin at its base for a hundred waits after.
// Every other wait (more of a stream the peer is sending, room to write)
// spins `base` only: there the next event comes at the pace of the other
// side's work, and a spin as long as that pace would turn the whole transfer
// into CPU time while saving only wakeups.
//
// Whether at all. A spin that ends without catching anything was pure cost,
// and taken from whoever else needed the CPU (on a host with more runnable
// threads than cores, the peer's backend or the device's own work). So the
// share of spins that caught something is kept (on_spin(), smoothed); while
// it is below kMinHitShare the connection does not spin, except every
// kProbeEvery-th wait, which spins to see whether spinning pays again.
// This is the adaptive-mutex rule applied to a socket.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace pg_rdma::transport {

class AdaptiveSpin {
public:
    using Duration = std::chrono::nanoseconds;
    static constexpr int kSmoothing = 8;          // each new sample weighs 1/8 in the averages
    static constexpr int kHitScale = 1024;        // fixed-point 1.0 of the hit share
    static constexpr int kMinHitShare = kHitScale / 4;  // spin while at least 1 in 4 spins catches
    static constexpr int kProbeEvery = 16;        // waits between spins while spinning does not pay
    static constexpr int kJustMissed = 2;         // a wait slept after a short spin, up to this x max, was a near miss
    static constexpr int kLongest = 4;            // samples count at most this x max
    static constexpr int kTailRise = 2;           // the tail estimate rises by 1/2 for a later reply
    static constexpr int kTailFall = 300;         // and falls by 1/300 for a sooner one: ~1 in 120 later

    AdaptiveSpin(Duration base, Duration max)
        : base_(base), max_(std::max(base, max)), average_(max_ + max_), tail_(base_) {}

    // How long to spin before this wait sleeps (0: sleep at once). Counts
    // the wait for the probe: call once per wait that could spin.
    [[nodiscard]] Duration budget(bool reply) {
        if (hit_share_ < kMinHitShare && ++skipped_ < kProbeEvery) return Duration::zero();
        skipped_ = 0;
        return reply ? reply_budget() : base_;
    }

    // A spin of budget() ended: `caught` says whether what the wait wanted
    // came during it.
    void on_spin(bool caught) { hit_share_ += ((caught ? kHitScale : 0) - hit_share_) / kSmoothing; }

    // A wait for a reply ended after `waited` without sleeping.
    void on_wait(Duration waited) {
        add_sample(waited);
        track_tail(waited);
    }
    // A wait for a reply ended after `waited`, having slept after a spin of
    // `spun` (zero: none). The reply came after the spin but maybe well
    // before `waited` (the wakeup's cost is in it): for the tail, which
    // only asks whether it came later than the estimate, a wait that ended
    // within `max` is enough (track_tail); it errs long only where the
    // spin stopped short of the estimate, and by less than `max`.
    void on_slept_wait(Duration waited, Duration spun) {
        add_sample(spun < max_ && waited <= kJustMissed * max_ ? max_ * 2 / 3 : waited);
        track_tail(waited);
    }

    [[nodiscard]] Duration reply_budget() const {
        if (average_ > max_) return base_;
        return std::clamp(std::max(average_ * 3 / 2, tail_), base_, max_);
    }
    [[nodiscard]] bool spinning_pays() const { return hit_share_ >= kMinHitShare; }
    [[nodiscard]] Duration average() const { return average_; }
    [[nodiscard]] Duration tail() const { return tail_; }

private:
    void add_sample(Duration sample) {
        sample = std::min(sample, kLongest * max_);
        // Weighted, not `+= (sample - average) / k`: that stops up to k - 1
        // ns above samples that come from above.
        average_ = (average_ * (kSmoothing - 1) + sample) / kSmoothing;
    }

    void track_tail(Duration waited) {
        if (waited > max_) return;  // no proof a spin up to max would have caught it (above)
        tail_ += waited > tail_ ? tail_ / kTailRise : -(tail_ / kTailFall);
        tail_ = std::clamp(tail_, base_, max_);
    }

    Duration base_;
    Duration max_;
    Duration average_;            // starts above max: no long spins until waits prove short
    Duration tail_;               // about the 99th percentile of replies, within [base, max]
    int hit_share_ = kHitScale;   // starts trusting the spin
    int skipped_ = 0;             // waits since the last spin while it does not pay
};

}  // namespace pg_rdma::transport
