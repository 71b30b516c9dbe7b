// CallClaim: the claim each Connection call holds for its duration.
#pragma once

#include <atomic>
#include <thread>

namespace pg_rdma::transport {

// A Connection call never waits for another: a nested or concurrent call
// fails (EIO) instead. So the claim needs no queue of sleepers, only an
// atomic exchange, which is what pthread_mutex_trylock does too, less its
// bookkeeping (type, owner, user count): about 55 instructions fewer per
// call, and each end makes four calls a round trip (perf/FINDINGS-archive.md). Meets the
// Lockable requirements, for std::lock_guard.
class CallClaim {
public:
    [[nodiscard]] bool try_lock() noexcept { return !held_.exchange(true, std::memory_order_acquire); }
    void unlock() noexcept { held_.store(false, std::memory_order_release); }
    // For the few that must have it (a fork's handover of the connection,
    // its return): they take it from a call that is about to see the
    // handover and let go, or is short, so yielding beats sleeping.
    void lock() noexcept {
        while (!try_lock()) std::this_thread::yield();
    }

private:
    std::atomic<bool> held_{false};
};

}  // namespace pg_rdma::transport
