#include "perf/rdma_stream.hpp"

#include <poll.h>

#include <chrono>
#include <cstdio>
#include <utility>

#include "perf/bench_error.hpp"
#include "perf/bench_report.hpp"
#include "protocol/control.hpp"
#include "transport/rdma_setup.hpp"

namespace pg_rdma::perf {

namespace {

namespace tp = pg_rdma::transport;

class RdmaStream final : public ByteStream {
public:
    explicit RdmaStream(std::unique_ptr<tp::Connection> conn) : conn_(std::move(conn)) {}

    ssize_t read(void* buf, std::size_t len) override { return conn_->read(buf, len); }
    ssize_t write(const void* buf, std::size_t len) override { return conn_->write(buf, len); }
    [[nodiscard]] int fd() const override { return conn_->fd(); }
    bool wait(short events, int timeout_ms) override
    {
        const int n = conn_->wait(events, timeout_ms);
        if (n < 0 && errno != EINTR)
            throw_errno("Connection::wait");
        return n != 0;
    }
    [[nodiscard]] const char* name() const override { return "rdma"; }
    // Spinning or not, the connection's own wait() does it (bench_settings).
    [[nodiscard]] bool waits_after_eagain() const override { return true; }
    [[nodiscard]] std::string stats_fields() const override;

private:
    std::unique_ptr<tp::Connection> conn_;
};

std::string RdmaStream::stats_fields() const
{
    const tp::ConnectionStats s = conn_->stats();
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "bytes_sent=%llu writes_posted=%llu control_sent=%llu control_received=%llu "
                  "write_blocked=%llu keepalive_probes=%llu waits_slept=%llu",
                  static_cast<unsigned long long>(s.bytes_sent),
                  static_cast<unsigned long long>(s.writes_posted),
                  static_cast<unsigned long long>(s.control_sent),
                  static_cast<unsigned long long>(s.control_received),
                  static_cast<unsigned long long>(s.write_blocked),
                  static_cast<unsigned long long>(s.keepalive_probes),
                  static_cast<unsigned long long>(s.waits_slept));
    return buf;
}

// The benchmark measures the transport as shipped: default settings. To
// spin, wait() busy-polls as long as the transport allows (kMaxBusyPoll,
// 100 ms) before it sleeps, for every wait: a busy-polling reference that
// goes through the same calls as an embedding does. Retrying read() at
// once instead would make every second EAGAIN in a row ask the kernel for
// events and arm the completion queue, costs no real caller pays.
tp::Settings bench_settings(bool spin)
{
    tp::Settings s{};
    if (spin)
        s.busy_poll = s.busy_poll_max = tp::kMaxBusyPoll;
    return s;
}

}  // namespace

std::unique_ptr<ByteStream> rdma_accept_one(const Endpoint& at, const protocol::Nonce& nonce,
                                            int accept_timeout_ms, bool spin)
{
    tp::Error err;
    const auto listener = tp::Listener::create(at.sa(), bench_settings(spin), err);
    if (!listener)
        throw BenchError("rdma listen: " + err.message);
    print_listening("rdma", port_of(listener->local_address()));
    // One deadline for the client to show up and the handshake to finish.
    const auto deadline = tp::SetupClock::now() + std::chrono::milliseconds(accept_timeout_ms);
    auto conn = listener->accept(nonce, nullptr, deadline, err);
    if (!conn)
        throw BenchError("rdma accept (within " + std::to_string(accept_timeout_ms / 1000) +
                         " s): " + err.message);
    return std::make_unique<RdmaStream>(std::move(conn));
}

std::unique_ptr<ByteStream> rdma_connect(const Endpoint& to, const protocol::Nonce& nonce, bool spin)
{
    tp::Error err;
    auto conn = tp::connect(to.sa(), nonce, bench_settings(spin), err);
    if (!conn)
        throw BenchError("rdma connect: " + err.message);
    return std::make_unique<RdmaStream>(std::move(conn));
}

std::string rdma_settings_line(bool spin)
{
    const tp::Settings s = bench_settings(spin);
    // What one connection registers: the RX ring the peer writes into, the
    // TX staging buffer, and one control slot per receive credit and per
    // send queue entry (settings.hpp).
    const std::size_t control_slots = std::size_t{s.credits} + s.send_queue_depth;
    const std::size_t pinned = std::size_t{s.rx_buffer_size} + s.tx_buffer_size +
                               control_slots * protocol::kControlMessageSize;
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "settings transport=rdma rx_buffer_size=%u tx_buffer_size=%u credits=%u "
                  "send_queue_depth=%u max_inline=%u control_message_size=%zu pinned_bytes=%zu "
                  "busy_poll_us=%lld busy_poll_max_us=%lld",
                  s.rx_buffer_size, s.tx_buffer_size, unsigned{s.credits},
                  unsigned{s.send_queue_depth}, s.max_inline, protocol::kControlMessageSize, pinned,
                  static_cast<long long>(s.busy_poll.count()),
                  static_cast<long long>(s.busy_poll_max.count()));
    return buf;
}

}  // namespace pg_rdma::perf
