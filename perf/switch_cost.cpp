// switch_cost — what a context switch costs the code that runs after it:
// the time to read one byte from each page of a working set, right after
// the process gets its CPU back, in counter ticks per page.
//
// Why: over RDMA the db bench's 8-client step makes about 1.7 times TCP's
// context switches per transaction, and its user time per transaction
// rises though its instructions barely do (perf/FINDINGS-archive.md, "Context
// switches and the same code's user time at 8 clients"). In the TCG guest
// QEMU empties its software TLB whenever the page tables change, so a
// process pays a software refill for every page it touches after a switch
// back from another process; a switch between two threads of one process
// keeps the page tables. Three ways of getting the CPU back, all pinned to
// one CPU, tell those apart:
//   alone    a system call that switches nothing (the baseline)
//   thread   another thread of this process hands a token back through a
//            pipe (a switch that keeps the page tables)
//   process  another process hands it back (a switch of page tables)
// Run by hand, in the guest and on a host, by perf/FINDINGS-archive.md's account:
//   switch_cost
// Output, one line per mode and size:
//   switch mode=process pages=256 ticks_per_page=162.0 ns_per_page=77.3
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <thread>

#include "perf/cycle_counter.hpp"

namespace {

using pg_rdma::perf::CycleCounter;

constexpr int kPageSizes[] = {16, 64, 256, 1024};  // pages in the working set
constexpr int kRounds = 20000;                     // switches per mode and size
constexpr std::size_t kPage = 4096;                // bytes
constexpr int kCpu = 0;                            // both sides share it: every hand-over is a switch

volatile unsigned char g_sink;

// Reads one byte of each page (at a different line of each, so that the
// cache's sets are not what is measured).
void touch(const unsigned char* pages, int count) {
    unsigned sum = 0;
    for (int i = 0; i < count; ++i) sum += pages[static_cast<std::size_t>(i) * kPage + (i * 64) % kPage];
    g_sink = static_cast<unsigned char>(sum);
}

bool pin_to_cpu() {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(kCpu, &set);
    return sched_setaffinity(0, sizeof set, &set) == 0;
}

// The other side: hands the token back at once, `rounds` times.
void echo(int in, int out, int rounds) {
    (void)pin_to_cpu();
    char token = 0;
    for (int i = 0; i < rounds; ++i)
        if (read(in, &token, 1) != 1 || write(out, &token, 1) != 1) return;
}

enum class Mode { Alone, Thread, Process };

// Ticks spent touching the pages, in total over kRounds, each right after
// the CPU came back by `mode`; 0 if the other side could not be set up.
std::uint64_t measure(Mode mode, const unsigned char* pages, int count) {
    int to_peer[2];
    int to_us[2];
    if (pipe(to_peer) != 0) return 0;
    if (pipe(to_us) != 0) {
        close(to_peer[0]);
        close(to_peer[1]);
        return 0;
    }
    std::thread peer_thread;
    pid_t peer_process = -1;
    if (mode == Mode::Thread) {
        peer_thread = std::thread(echo, to_peer[0], to_us[1], kRounds);
    } else if (mode == Mode::Process) {
        peer_process = fork();
        if (peer_process == 0) {
            // Its own copies of our ends closed, its read sees the end of
            // the stream when ours close.
            close(to_peer[1]);
            close(to_us[0]);
            echo(to_peer[0], to_us[1], kRounds);
            _exit(0);
        }
    }
    std::uint64_t ticks = 0;
    char token = 0;
    bool ok = peer_process != -1 || mode != Mode::Process;
    for (int i = 0; ok && i < kRounds; ++i) {
        if (mode == Mode::Alone) {
            (void)getppid();  // a system call that switches nothing
        } else if (write(to_peer[1], &token, 1) != 1 || read(to_us[0], &token, 1) != 1) {
            ok = false;
            break;
        }
        const std::uint64_t start = CycleCounter::now();
        touch(pages, count);
        ticks += CycleCounter::now() - start;
    }
    // The write end first: a peer still reading sees the end and returns,
    // whatever happened above.
    close(to_peer[1]);
    if (peer_thread.joinable()) peer_thread.join();
    if (peer_process > 0) waitpid(peer_process, nullptr, 0);
    for (const int fd : {to_peer[0], to_us[0], to_us[1]}) close(fd);
    return ok ? ticks : 0;
}

const char* name(Mode mode) {
    switch (mode) {
        case Mode::Alone: return "alone";
        case Mode::Thread: return "thread";
        case Mode::Process: return "process";
    }
    return "?";
}

}  // namespace

int main() {
    if (!pin_to_cpu()) {
        std::perror("switch_cost: sched_setaffinity");
        return 1;
    }
    constexpr int kLargest = kPageSizes[std::size(kPageSizes) - 1];
    void* map = mmap(nullptr, kLargest * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        std::perror("switch_cost: mmap");
        return 1;
    }
    auto* pages = static_cast<unsigned char*>(map);
    std::memset(pages, 1, kLargest * kPage);  // every page present before any timing
    // The counter's rate, over the whole run, against steady_clock.
    const auto wall_start = std::chrono::steady_clock::now();
    const std::uint64_t ticks_start = CycleCounter::now();
    struct Result {
        Mode mode;
        int pages;
        double ticks_per_page;
    };
    Result results[std::size(kPageSizes) * 3];
    std::size_t n = 0;
    for (const Mode mode : {Mode::Alone, Mode::Thread, Mode::Process}) {
        for (const int count : kPageSizes) {
            const std::uint64_t ticks = measure(mode, pages, count);
            if (ticks == 0) {
                std::fprintf(stderr, "switch_cost: the %s measurement failed\n", name(mode));
                return 1;
            }
            results[n++] = {mode, count, static_cast<double>(ticks) / kRounds / count};
        }
    }
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - wall_start).count();
    const double ns_per_tick = ns / static_cast<double>(CycleCounter::now() - ticks_start);
    for (std::size_t i = 0; i < n; ++i)
        std::printf("switch mode=%s pages=%d ticks_per_page=%.1f ns_per_page=%.1f\n", name(results[i].mode),
                    results[i].pages, results[i].ticks_per_page, results[i].ticks_per_page * ns_per_tick);
    return 0;
}
