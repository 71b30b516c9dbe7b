// The clock that times each round trip of a latency phase: the CPU's cycle
// counter, as perftest's ib_write_lat times its own.
//
// Why not steady_clock: where the kernel's clocksource has no vDSO reader
// (a guest on HPET or the ACPI PM timer) every clock_gettime is a system
// call, about 0.9 us in the TCG guest, and a round trip timed between two
// readings carries about one whole call on its path (the end of the first
// one's and the start of the second one's); perftest, the reference the
// bench's ratios divide by, carries none. Reading the counter costs tens of
// nanoseconds anywhere.
//
// Its rate is not assumed: a latency measurement converts its counts with
// the ratio of steady_clock's time to the counter's over the whole
// measurement (80 ms to seconds in the bench; two readings of each;
// CycleRate), so a counter that runs at a constant rate other than the
// CPU's nominal one (the invariant TSC of every current x86 server) needs
// no calibration step of its own: the step that fails under load for
// perftest ("r^2 < 0.9"). Needed is only that the counter runs at one rate during the
// measurement and agrees between CPUs (an invariant TSC; QEMU's TCG serves
// it from one host-wide counter that it keeps monotonic). Elsewhere than
// on x86 it is steady_clock itself.
//
// What would break that: a counter that jumps (a vCPU thread moved between
// host CPUs whose counters disagree, which qemu's monotonic clamp turns
// into forward steps). A step of D within a measurement of T shrinks every
// other sample by T / (T + D), lowering the median. So each result line
// prints the rate it measured (counter_mhz): a constant-rate counter gives
// the same figure in every measurement of a run (two steady_clock readings
// over 80 ms or more: within about a tenth of a percent), and report.py
// warns where one lies more than COUNTER_SPREAD_LIMIT above the run's
// median, the bound on that bias. (A step cannot lower a rate: one below
// the median is a steady_clock reading delayed at the start.)
#pragma once

#include <chrono>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace pg_rdma::perf {

struct CycleCounter {
    // What the bench's result line says timed the round trips.
    static constexpr const char* kName =
#if defined(__x86_64__) || defined(__i386__)
        "tsc";
#else
        "steady_clock";
#endif

    [[nodiscard]] static std::uint64_t now() noexcept
    {
#if defined(__x86_64__) || defined(__i386__)
        return __rdtsc();
#else
        return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
    }
};

// The counter's rate against steady_clock, from construction to each
// micros_per_count(): constructed before the round trips whose counts it
// converts, asked after the last of them.
class CycleRate {
public:
    CycleRate() : time_(std::chrono::steady_clock::now()), count_(CycleCounter::now()) {}

    // Microseconds per count since construction; 0 if the counter did not
    // advance (no rate to convert with).
    [[nodiscard]] double micros_per_count() const
    {
        const std::uint64_t count = CycleCounter::now();
        const auto elapsed = std::chrono::steady_clock::now() - time_;
        if (count <= count_)
            return 0;
        return std::chrono::duration<double, std::micro>(elapsed).count() / static_cast<double>(count - count_);
    }

private:
    std::chrono::steady_clock::time_point time_;
    std::uint64_t count_;
};

}  // namespace pg_rdma::perf
