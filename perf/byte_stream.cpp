// Blocking helpers over a non-blocking ByteStream: the one place where the
// benchmark waits, so TCP and RDMA wait the same way.
#include "perf/byte_stream.hpp"

#include <poll.h>
#include <time.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>

#include "perf/bench_error.hpp"

namespace pg_rdma::perf {

namespace {

// A wait re-checks the stream after this long even without an event, so a
// missed wakeup costs one slice (and is counted) instead of hanging the run.
constexpr int kPollSliceMs = 1'000;
// Nothing moved for this long: the peer or the transport is stuck.
constexpr int kIoTimeoutMs = 30'000;

}  // namespace

bool ByteStream::wait(short events, int timeout_ms)
{
    pollfd pfd{};
    pfd.fd = fd();
    pfd.events = events;
    const int n = ::poll(&pfd, 1, timeout_ms);
    if (n < 0 && errno != EINTR)
        throw_errno("poll");
    return n != 0;
}

namespace {

// Tracks how long a transfer has gone without progress and waits between
// attempts: wait() in time slices, or nothing at all (a socket spinning).
class Waiter {
public:
    Waiter(ByteStream& stream, short events) : stream_(stream), events_(events) {}

    // After an attempt that moved bytes.
    void progressed(IoCounters& counters)
    {
        counters.stalls += slice_expired_ ? 1 : 0;
        slice_expired_ = false;
        idle_since_.reset();
    }

    // After EAGAIN; throws once nothing moved for kIoTimeoutMs.
    void wait(const char* what)
    {
        const auto now = coarse_now();
        if (!idle_since_)
            idle_since_ = now;
        if (now - *idle_since_ >= std::chrono::milliseconds(kIoTimeoutMs))
            throw BenchError(std::string(what) + ": no progress for " +
                             std::to_string(kIoTimeoutMs / 1000) + " s");
        if (stream_.waits_after_eagain() && !stream_.wait(events_, kPollSliceMs))
            slice_expired_ = true;
    }

private:
    // Once per EAGAIN, so at least once per round trip: the coarse clock
    // (a tick's resolution, ample for a 30 s watchdog) is read from the
    // vDSO's data, never by a system call, also where the precise one is a
    // system call (a clocksource without vDSO support, as the TCG guest's
    // HPET), and so adds nothing to the latency measured.
    static std::chrono::nanoseconds coarse_now()
    {
        timespec ts{};
        ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
        return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
    }

    ByteStream& stream_;
    short events_;
    bool slice_expired_ = false;
    std::optional<std::chrono::nanoseconds> idle_since_;
};

// Calls `step(done)` (one read or write at offset `done`, POSIX result) until
// `len` bytes moved or it returns 0 (end of stream); returns the bytes moved.
// On EAGAIN waits for `events` on the stream's fd.
template <typename Step>
std::size_t transfer(ByteStream& stream, std::size_t len, short events, const char* what,
                     IoCounters& counters, Step step)
{
    Waiter waiter(stream, events);
    std::size_t done = 0;
    while (done < len) {
        const ssize_t n = step(done);
        if (n > 0) {
            done += static_cast<std::size_t>(n);
            waiter.progressed(counters);
        } else if (n == 0) {
            return done;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            waiter.wait(what);
        } else {
            throw_errno(what);
        }
    }
    return done;
}

std::size_t read_some_of(ByteStream& stream, void* buf, std::size_t len, IoCounters& counters)
{
    auto* bytes = static_cast<unsigned char*>(buf);
    return transfer(stream, len, POLLIN, "read", counters, [&](std::size_t done) {
        return stream.read(bytes + done, len - done);
    });
}

}  // namespace

void throw_errno(const std::string& what)
{
    throw BenchError(what + ": " + std::strerror(errno));
}

void write_all(ByteStream& stream, const void* buf, std::size_t len, IoCounters& counters)
{
    const auto* bytes = static_cast<const unsigned char*>(buf);
    const std::size_t done =
        transfer(stream, len, POLLOUT, "write", counters,
                 [&](std::size_t offset) { return stream.write(bytes + offset, len - offset); });
    if (done != len)
        throw BenchError("write: the stream accepted 0 bytes");
}

void read_all(ByteStream& stream, void* buf, std::size_t len, IoCounters& counters)
{
    if (read_some_of(stream, buf, len, counters) != len)
        throw BenchError("read: the peer closed the stream early");
}

bool read_all_or_eof(ByteStream& stream, void* buf, std::size_t len, IoCounters& counters)
{
    const std::size_t got = read_some_of(stream, buf, len, counters);
    if (got == 0)
        return false;
    if (got != len)
        throw BenchError("read: the peer closed the stream in the middle of a message");
    return true;
}

bool wait_readable(int fd, int timeout_ms)
{
    pollfd pfd{};
    pfd.fd = fd;
    pfd.events = POLLIN;
    for (;;) {
        const int n = ::poll(&pfd, 1, timeout_ms);
        if (n >= 0)
            return n > 0;
        if (errno != EINTR)
            throw_errno("poll");
    }
}

}  // namespace pg_rdma::perf
