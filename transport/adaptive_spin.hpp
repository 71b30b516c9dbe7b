// How long wait() busy-polls before the caller sleeps.
//
// Sleeping costs a wakeup (interrupt, scheduler, epoll) that can exceed the
// round trip itself; spinning costs CPU. The spin adapts to how long waits
// for data have recently lasted (a smoothed average):
//   - short waits (a request/response exchange): spin 1.5 x the average,
//     at least `base`, at most `max`, so the answer is caught without a wakeup;
//   - waits longer than `max` (an idle session, think time): spin only
//     `base`, since spinning longer would burn CPU and still end in a sleep.
// This is the adaptive-mutex rule applied to a socket.
#pragma once

#include <algorithm>
#include <chrono>

namespace pg_rdma::transport {

class AdaptiveSpin {
public:
    using Duration = std::chrono::nanoseconds;
    static constexpr int kSmoothing = 8;  // each new wait weighs 1/8 in the average

    AdaptiveSpin(Duration base, Duration max) : base_(base), max_(std::max(base, max)), average_(max_ + max_) {}

    [[nodiscard]] Duration budget() const {
        if (average_ > max_) return base_;
        return std::clamp(average_ * 3 / 2, base_, max_);
    }

    // A wait for data ended after `waited` (spinning and sleeping together).
    void on_wait(Duration waited) { average_ += (waited - average_) / kSmoothing; }

private:
    Duration base_;
    Duration max_;
    Duration average_;  // starts above max: no long spins until waits prove short
};

}  // namespace pg_rdma::transport
