// The benchmark's view of a connection: a connected, non-blocking byte stream
// that is either a pg_rdma transport connection or a plain TCP socket. The
// ping-pong and streaming code only sees this interface, so both transports
// run the identical code path and their figures compare apples to apples.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace pg_rdma::perf {

class ByteStream {
public:
    virtual ~ByteStream() = default;
    ByteStream() = default;
    ByteStream(const ByteStream&) = delete;
    ByteStream& operator=(const ByteStream&) = delete;

    // POSIX contract: bytes moved, 0 at end of stream (read only), or -1 with
    // errno; EAGAIN means "poll fd() for the events below, then retry".
    virtual ssize_t read(void* buf, std::size_t len) = 0;
    virtual ssize_t write(const void* buf, std::size_t len) = 0;
    [[nodiscard]] virtual int fd() const = 0;
    // Waits up to `timeout_ms` for `events` (POLLIN / POLLOUT); true if they
    // (or an error) came, false when the time ran out. A socket polls its
    // fd; an RDMA connection uses its own wait primitive, which is how an
    // embedding (the server extension, the client library) waits, busy-poll
    // included.
    virtual bool wait(short events, int timeout_ms);
    // "tcp" or "rdma", as printed in every result line.
    [[nodiscard]] virtual const char* name() const = 0;
    // "key=value ..." counters the transport keeps, for the closing "stats"
    // line; may be empty.
    [[nodiscard]] virtual std::string stats_fields() const = 0;

    // Spinning busy-polls instead of sleeping in poll(), as perftest and
    // rstream do: it burns a CPU but takes the cost of a sleep and wakeup
    // (large in a TCG guest) out of the figures. A socket retries at once
    // after EAGAIN; an RDMA connection made to spin busy-polls inside its
    // wait() (rdma_stream.hpp).
    void set_spin(bool spin) { spin_ = spin; }
    [[nodiscard]] bool spins() const { return spin_; }
    // Whether an EAGAIN is followed by wait(); otherwise by the next attempt.
    [[nodiscard]] virtual bool waits_after_eagain() const { return !spin_; }

private:
    bool spin_ = false;
};

// Waits that ran out their poll() time slice and were nevertheless followed
// by progress: the stream had something to do but its fd did not say so (a
// missed wakeup). Reported next to every figure so that a slow result caused
// by one shows up as such instead of as mysterious latency.
struct IoCounters {
    std::uint64_t stalls = 0;
};

// Move exactly `len` bytes, waiting with poll() whenever the stream says
// EAGAIN. Throw BenchError on an error, on end of stream, or when nothing
// moved for kIoTimeout.
void write_all(ByteStream& stream, const void* buf, std::size_t len, IoCounters& counters);
void read_all(ByteStream& stream, void* buf, std::size_t len, IoCounters& counters);
// As read_all(), but a clean end of stream before the first byte returns
// false instead of throwing (a peer that is done).
bool read_all_or_eof(ByteStream& stream, void* buf, std::size_t len, IoCounters& counters);

// Waits up to `timeout_ms` for POLLIN on `fd` (a listener); false on timeout.
bool wait_readable(int fd, int timeout_ms);

}  // namespace pg_rdma::perf
