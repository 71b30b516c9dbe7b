#include "perf/rsocket_stream.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <exception>
#include <string>
#include <thread>
#include <utility>

#include "perf/bench_error.hpp"
#include "perf/bench_report.hpp"
#include "perf/owned_fd.hpp"

namespace pg_rdma::perf {

namespace {

// rstream's buffer size when not given one (its -B): the same here, so
// that this figure and rstream's measure one configuration.
constexpr int kBufferBytes = 512 * 1024;
// How often a listener looks for its client; setup is never timed.
constexpr std::chrono::milliseconds kAcceptPollInterval{1};

// An rsocket is an index of librdmacm's, not a kernel descriptor.
using RsocketFd = OwnedFd<::rclose>;

// librdmacm before v63 (Debian 12 ships v44) mis-times rpoll()'s timeout
// (each wakeup takes the time since the call began off what is left, so a
// timeout can end far too soon), and one rpoll() that times out leaves the
// library's poll state such that every later one that must wait spins in
// sched_yield() for good. So this stream never gives rpoll() a timeout:
// accept polls raccept() itself, connect blocks, and wait() waits without
// a limit (the runner's timeout bounds a run that never wakes).
class RsocketStream final : public ByteStream {
public:
    explicit RsocketStream(int fd) : fd_(fd) {}
    // rclose() shuts a connected rsocket down and waits for its sends,
    // which a dead peer can make long. Unwound by an error, the stream
    // leaves the rsocket to the process's exit, so that the error is
    // printed now.
    ~RsocketStream() override
    {
        if (std::uncaught_exceptions() > 0)
            (void)fd_.release();
    }
    RsocketStream(const RsocketStream&) = delete;
    RsocketStream& operator=(const RsocketStream&) = delete;

    ssize_t read(void* buf, std::size_t len) override { return ::rrecv(fd_.get(), buf, len, 0); }
    ssize_t write(const void* buf, std::size_t len) override { return ::rsend(fd_.get(), buf, len, 0); }
    [[nodiscard]] int fd() const override { return fd_.get(); }
    // rpoll, not poll: an rsocket is no kernel descriptor, and rpoll is
    // how an rsocket application waits (its spin, then its sleep).
    bool wait(short events, int /*timeout_ms: see above*/) override
    {
        pollfd pfd{};
        pfd.fd = fd_.get();
        pfd.events = events;
        if (::rpoll(&pfd, 1, -1) < 0 && errno != EINTR)
            throw_errno("rpoll");
        return true;
    }
    [[nodiscard]] const char* name() const override { return "rsocket"; }
    [[nodiscard]] std::string stats_fields() const override { return {}; }

private:
    RsocketFd fd_;
};

void set_int_option(int fd, int level, int name, int value, const char* what)
{
    if (::rsetsockopt(fd, level, name, &value, sizeof value) != 0)
        throw_errno(what);
}

// Before connect or listen: the buffers are sized when the connection is
// made (an accepted rsocket takes its listener's).
int new_rsocket(const Endpoint& ep)
{
    RsocketFd fd(::rsocket(ep.addr.ss_family, SOCK_STREAM, 0));
    if (fd.get() < 0)
        throw_errno("rsocket");
    set_int_option(fd.get(), SOL_SOCKET, SO_SNDBUF, kBufferBytes, "rsetsockopt(SO_SNDBUF)");
    set_int_option(fd.get(), SOL_SOCKET, SO_RCVBUF, kBufferBytes, "rsetsockopt(SO_RCVBUF)");
    return fd.release();
}

// Connected: no Nagle, and EAGAIN rather than blocking, as every stream of
// the benchmark.
std::unique_ptr<ByteStream> make_stream(int connected)
{
    auto stream = std::make_unique<RsocketStream>(connected);
    set_int_option(connected, IPPROTO_TCP, TCP_NODELAY, 1, "rsetsockopt(TCP_NODELAY)");
    if (::rfcntl(connected, F_SETFL, O_NONBLOCK) != 0)
        throw_errno("rfcntl(O_NONBLOCK)");
    return stream;
}

}  // namespace

std::unique_ptr<ByteStream> rsocket_accept_one(const Endpoint& at, int accept_timeout_ms)
{
    const RsocketFd listener(new_rsocket(at));
    // A port an earlier run used may come round again.
    set_int_option(listener.get(), SOL_SOCKET, SO_REUSEADDR, 1, "rsetsockopt(SO_REUSEADDR)");
    if (::rbind(listener.get(), at.sa(), at.addr_len) != 0)
        throw_errno("rbind");
    if (::rlisten(listener.get(), 1) != 0)
        throw_errno("rlisten");
    sockaddr_storage bound{};
    socklen_t bound_len = sizeof bound;
    if (::rgetsockname(listener.get(), reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0)
        throw_errno("rgetsockname");
    // A non-blocking raccept() polled against our own deadline: rpoll()'s
    // timeout cannot be trusted (RsocketStream).
    if (::rfcntl(listener.get(), F_SETFL, O_NONBLOCK) != 0)
        throw_errno("rfcntl(O_NONBLOCK)");
    print_listening("rsocket", port_of(bound));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(accept_timeout_ms);
    for (;;) {
        const int fd = ::raccept(listener.get(), nullptr, nullptr);
        if (fd >= 0)
            return make_stream(fd);
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            throw_errno("raccept");
        if (std::chrono::steady_clock::now() >= deadline)
            throw BenchError("raccept: no client within " + std::to_string(accept_timeout_ms / 1000) + " s");
        std::this_thread::sleep_for(kAcceptPollInterval);
    }
}

std::unique_ptr<ByteStream> rsocket_connect(const Endpoint& to)
{
    RsocketFd fd(new_rsocket(to));
    // Blocking, without a limit of its own (RsocketStream): the runner's
    // timeout bounds it.
    if (::rconnect(fd.get(), to.sa(), to.addr_len) != 0)
        throw_errno("rconnect");
    return make_stream(fd.release());
}

}  // namespace pg_rdma::perf
