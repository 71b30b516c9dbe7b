// Socket-like calls of Stream (see connection.hpp for the contract).
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "transport/stream.hpp"

namespace pg_rdma::transport {

Stream::Stream(std::unique_ptr<Endpoint> endpoint)
    : endpoint_(std::move(endpoint)),
      settings_(endpoint_->settings()),
      rx_(settings_.rx_buffer_size),
      staging_(settings_.tx_buffer_size),
      sq_(settings_.send_queue_depth),
      recv_credits_(settings_.credits),
      keepalive_(settings_.keepalive_interval, settings_.keepalive_timeout, Clock::now()),
      spin_(settings_.busy_poll, settings_.busy_poll_max) {
    stats_.rx_buffer_size = settings_.rx_buffer_size;
}

Stream::~Stream() = default;

ssize_t Stream::read(void* buf, std::size_t len) {
    if (closed_) return errno = EBADF, -1;
    if (len == 0) return 0;
    poll_completions();  // cheap (no system call) and keeps receives posted
    if (rx_.unread() == 0 && !eof()) {
        if (!wait_started_) wait_started_ = Clock::now();
        busy_poll([this] { return rx_.unread() > 0 || eof(); });
        if (rx_.unread() == 0 && !eof()) progress();
    }
    if (wait_started_ && rx_.unread() > 0) {  // a wait for data just ended
        spin_.on_wait(Clock::now() - *wait_started_);
        wait_started_.reset();
    }
    if (rx_.unread() == 0) {
        if (eof()) return 0;
        errno = error_ != 0 ? error_ : EAGAIN;
        return -1;
    }
    auto* out = static_cast<std::uint8_t*>(buf);
    std::size_t copied = 0;
    // At most two pieces: up to the ring's end, then from its start.
    while (copied < len && rx_.unread() > 0) {
        const auto piece = static_cast<std::uint32_t>(
            std::min<std::size_t>(len - copied, rx_.contiguous_unread()));
        std::memcpy(out + copied, endpoint_->rx_ring() + rx_.read_offset(), piece);
        rx_.consume(piece);
        copied += piece;
    }
    stats_.bytes_received += copied;
    if (rx_.announce_due()) credit_update_pending_ = true;
    flush_control();
    update_readiness();
    return static_cast<ssize_t>(copied);
}

ssize_t Stream::writev(const iovec* iov, int iovcnt) {
    if (closed_) return errno = EBADF, -1;
    if (error_ != 0) return errno = error_, -1;
    if (close_queued_ || peer_disconnected_) return errno = EPIPE, -1;
    write_blocked_ = false;
    std::size_t total = post_iov(iov, iovcnt);
    if (total == 0 && error_ == 0) {
        // Blocked: collect completions and credit updates once. This also
        // re-arms the CQ, so fd() wakes the caller when room frees up.
        progress();
        total = post_iov(iov, iovcnt);
    }
    if (total > 0) return static_cast<ssize_t>(total);
    if (error_ != 0) return errno = error_, -1;
    write_blocked_ = true;
    ++stats_.write_blocked;
    update_readiness();
    return errno = EAGAIN, -1;
}

std::size_t Stream::post_iov(const iovec* iov, int iovcnt) {
    std::size_t total = 0;
    for (int i = 0; i < iovcnt; ++i) {
        const auto* base = static_cast<const std::uint8_t*>(iov[i].iov_base);
        for (std::size_t done = 0; done < iov[i].iov_len;) {
            const auto want = static_cast<std::uint32_t>(
                std::min<std::size_t>(iov[i].iov_len - done, std::numeric_limits<std::uint32_t>::max()));
            const std::uint32_t n = post_data(base + done, want);
            if (n == 0) return total;
            done += n;
            total += n;
        }
    }
    return total;
}

int Stream::shutdown_write() {
    if (closed_) return errno = EBADF, -1;
    close_queued_ = true;
    flush_control();
    update_readiness();
    return 0;
}

int Stream::close() {
    if (closed_) return 0;
    closing_ = true;
    int rc = 0;
    if (error_ == 0 && phase_ == Phase::Established) {
        close_queued_ = true;
        if (!drain(Clock::now() + settings_.close_drain_timeout) && error_ == 0) {
            errno = ETIMEDOUT;  // the peer did not take our last bytes in time
            rc = -1;
        }
    }
    rdma_disconnect(endpoint_->id());
    closed_ = true;
    return rc;
}

bool Stream::readable() {
    if (closed_) return true;
    poll_completions();
    if (rx_.unread() == 0 && !eof() && error_ == 0) progress();
    return rx_.unread() > 0 || eof() || error_ != 0;
}

}  // namespace pg_rdma::transport
