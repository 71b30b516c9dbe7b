// The one pollable descriptor of a connection: an epoll instance holding
// the completion channel, the rdma_cm event channel, a keepalive timerfd and
// an eventfd. The eventfd makes readiness level-triggered: the connection
// keeps it signalled while read() or write() has something to do (buffered
// bytes, EOF, an error, a freed-up write), which completion events alone,
// being one-shot, cannot express.
#pragma once

#include <chrono>
#include <cstdint>

#include "transport/error.hpp"

namespace pg_rdma::transport {

// Descriptors one connection holds besides its TCP socket: this epoll set,
// its eventfd and timerfd, the completion channel, the rdma_cm event
// channel and, for a connection made by an upgrade, its own copy of the TCP
// socket (the failover's path, Connection::attach_tcp). A process owning N
// connections needs 6 x N of them (README, "Descriptors").
inline constexpr int kDescriptorsPerConnection = 6;
// In a process forked after its parent used RDMA, a connection also holds a
// device context of its own (endpoint.hpp): ibv_open_device opens its
// command descriptor and an asynchronous event descriptor.
inline constexpr int kOwnContextDescriptors = 2;

class FileDescriptor {
public:
    FileDescriptor() = default;
    explicit FileDescriptor(int fd) : fd_(fd) {}
    ~FileDescriptor();
    FileDescriptor(FileDescriptor&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    FileDescriptor& operator=(FileDescriptor&& o) noexcept;
    FileDescriptor(const FileDescriptor&) = delete;
    FileDescriptor& operator=(const FileDescriptor&) = delete;
    [[nodiscard]] int get() const { return fd_; }
    [[nodiscard]] bool valid() const { return fd_ >= 0; }

private:
    int fd_ = -1;
};

class EventSet {
public:
    // Which of the sources inside fd() have something (pending()).
    enum Source : unsigned {
        kCompletion = 1u << 0,  // the CQ's event fired: re-arm it
        kCm = 1u << 1,          // an rdma_cm event (disconnect) waits
        kTick = 1u << 2,        // the keepalive timer expired
        kReady = 1u << 3,       // set_ready(true) is in force
        kUnsure = 1u << 4,      // the look failed: every source may hold something, or not
        kTcp = 1u << 5,         // the session's TCP connection (watch_tcp) has an event
    };

    // `completion_fd` and `cm_fd` must already be non-blocking.
    bool init(int completion_fd, int cm_fd, std::chrono::milliseconds tick, Error& err);

    [[nodiscard]] int fd() const { return epoll_.get(); }
    // Keeps fd() readable until set_ready(false). Inline: the data path
    // calls it at every write, and it mostly changes nothing.
    void set_ready(bool ready) {
        if (ready != ready_) change_ready(ready);
    }
    // Watches `fd` (the session's TCP connection) for `events` (epoll bits;
    // 0 stops watching it). `previous` is what it was watched for (0: not).
    // False with errno.
    bool watch_tcp(int fd, std::uint32_t previous, std::uint32_t events);
    // Stops watching the completion and rdma_cm channels: the queue pair
    // failed and the session went onto TCP, and an event left in either
    // would keep fd() readable for good.
    void forget_rdma_sources(int completion_fd, int cm_fd);
    // Changes the keepalive tick period (after negotiation); 0 stops it.
    bool set_tick(std::chrono::milliseconds tick);
    // True when the keepalive timer fired since the last call.
    bool take_tick();
    // The sources that have something, in one system call and without
    // consuming anything; all bits if the kernel would not say.
    [[nodiscard]] unsigned pending() const;
    // Waits until fd() is readable or `timeout` passes (negative: no limit).
    // 1 ready, 0 timeout, -1 with errno (EINTR: a signal arrived). Sets
    // `sources` to those that were ready at the wakeup, which pending()
    // would ask the kernel again (one system call fewer per sleep).
    int wait(std::chrono::milliseconds timeout, unsigned& sources) const;

private:
    void change_ready(bool ready);
    // One epoll_wait on the set: how many sources fired (-1 with errno),
    // and their bits in `sources`.
    int ready_sources(int timeout_ms, unsigned& sources) const;

    FileDescriptor epoll_;
    FileDescriptor wake_;   // eventfd
    FileDescriptor timer_;  // timerfd, periodic keepalive tick
    bool ready_ = false;
};

}  // namespace pg_rdma::transport
