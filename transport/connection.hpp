// A reliable, ordered byte stream over one RC queue pair, used like a
// non-blocking socket.
//
// Contract (POSIX style: -1 and errno on failure):
//   read()   returns bytes, or 0 once the peer closed and every byte it wrote
//            before closing has been delivered; EAGAIN when nothing is there
//            yet; ECONNRESET when the peer vanished without closing (bytes
//            that had already arrived are delivered first); ETIMEDOUT when
//            nothing proved the peer alive for the keepalive timeout; EPROTO
//            when the peer broke the protocol (the connection is then closed).
//   write()/writev() return bytes accepted (maybe fewer than asked), EAGAIN
//            when the peer's ring, the credits or the local staging buffer are
//            full, EPIPE after shutdown(SHUT_WR) or close.
//   fd()     one pollable descriptor. POLLIN on it means "call read() or
//            write() again": data, EOF or an error is ready, or something that
//            was blocking a write has been freed. RDMA has no POLLOUT, so a
//            writer that got EAGAIN waits for POLLIN on fd() and retries; the
//            descriptor never reports POLLOUT itself. fd() also turns readable
//            on keepalive ticks; read() then simply returns EAGAIN.
//   shutdown(SHUT_WR) sends Close after the bytes already written.
//   close()  Close, then waits up to Settings::close_drain_timeout for every
//            queued send to complete, then disconnects. The destructor closes.
//
// Bytes written are delivered even if the process exits without closing: an
// exit handler closes every connection this process still owns (a PostgreSQL
// backend sends its last FATAL message and exits without closing its socket).
//
// Not thread-safe: one connection belongs to one thread at a time. Verbs
// resources belong to the process that created the connection; in a forked
// child every call fails with EBADF and the exit handler leaves it alone.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <string>

namespace pg_rdma::transport {

class Stream;

// Figures for observability (pg_stat_rdma) and tests.
struct ConnectionStats {
    std::uint64_t bytes_sent = 0;
    std::uint64_t bytes_received = 0;
    std::uint64_t writes_posted = 0;    // RDMA WRITE WITH IMM work requests
    std::uint64_t control_sent = 0;     // control messages sent
    std::uint64_t control_received = 0;
    std::uint64_t write_blocked = 0;    // times write() returned EAGAIN
    std::uint32_t rx_buffer_size = 0;   // ours
    std::uint32_t peer_rx_buffer_size = 0;
    std::uint8_t protocol_version = 0;  // negotiated
    std::uint64_t features = 0;         // negotiated
};

class Connection {
public:
    explicit Connection(std::unique_ptr<Stream> stream);
    ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    ssize_t read(void* buf, std::size_t len);
    ssize_t write(const void* buf, std::size_t len);
    ssize_t writev(const struct iovec* iov, int iovcnt);
    int shutdown(int how);
    int close();

    [[nodiscard]] int fd() const;
    // True when read() would not return EAGAIN (data, EOF or an error waits).
    [[nodiscard]] bool readable();
    [[nodiscard]] ConnectionStats stats() const;
    // Why the connection failed, in words for a log line; empty while it works.
    [[nodiscard]] std::string failure_reason() const;

    // Closes every connection this process still owns. Registered with
    // atexit() when the first connection is made; safe to call more than once.
    static void close_all_at_exit();

private:
    [[nodiscard]] bool usable() const;
    std::unique_ptr<Stream> stream_;
    pid_t owner_pid_;
};

}  // namespace pg_rdma::transport
