// Sender-side views of the two byte rings a write passes through:
//   PeerRingWindow - the peer's RX ring, as far as its CreditUpdates tell;
//   TxStaging      - our registered staging buffer, filled by write() and
//                    released in order as signalled send completions arrive.
// Both are cumulative counters like RxRing (see rx_ring.hpp).
#pragma once

#include <algorithm>
#include <cstdint>

namespace pg_rdma::transport {

class PeerRingWindow {
public:
    void reset(std::uint32_t size) {
        size_ = size;
        written_ = peer_consumed_ = 0;
    }

    // How many bytes the next write may put into the peer's ring without
    // overwriting unread data or crossing the ring's end.
    [[nodiscard]] std::uint32_t writable_contiguous() const {
        if (size_ == 0) return 0;
        const std::uint64_t free = size_ - (written_ - peer_consumed_);
        return static_cast<std::uint32_t>(std::min<std::uint64_t>(free, size_ - write_offset()));
    }
    [[nodiscard]] std::uint32_t write_offset() const {
        return static_cast<std::uint32_t>(written_ % size_);
    }
    void on_written(std::uint32_t len) { written_ += len; }

    // CreditUpdate.rx_consumed from the peer. False when it is impossible:
    // going backwards, or claiming to have consumed bytes never written.
    [[nodiscard]] bool on_peer_consumed(std::uint64_t consumed) {
        if (consumed < peer_consumed_ || consumed > written_) return false;
        peer_consumed_ = consumed;
        return true;
    }

    [[nodiscard]] std::uint64_t written() const { return written_; }
    [[nodiscard]] std::uint64_t peer_consumed() const { return peer_consumed_; }
    [[nodiscard]] std::uint32_t size() const { return size_; }

private:
    std::uint32_t size_ = 0;
    std::uint64_t written_ = 0;
    std::uint64_t peer_consumed_ = 0;
};

class TxStaging {
public:
    explicit TxStaging(std::uint32_t size) : size_(size) {}

    // Up to `want` bytes that can be filled in one copy at offset().
    [[nodiscard]] std::uint32_t contiguous_free(std::uint32_t want) const {
        const std::uint64_t free = size_ - (head_ - tail_);
        return static_cast<std::uint32_t>(
            std::min<std::uint64_t>({want, free, size_ - offset()}));
    }
    [[nodiscard]] std::uint32_t offset() const { return static_cast<std::uint32_t>(head_ % size_); }
    void fill(std::uint32_t len) { head_ += len; }
    // Everything before `position` (a past head()) has been sent.
    void release_to(std::uint64_t position) { tail_ = std::max(tail_, position); }

    [[nodiscard]] std::uint64_t head() const { return head_; }
    [[nodiscard]] std::uint64_t in_use() const { return head_ - tail_; }
    [[nodiscard]] std::uint32_t size() const { return size_; }

private:
    std::uint32_t size_;
    std::uint64_t head_ = 0;  // bytes filled
    std::uint64_t tail_ = 0;  // bytes whose send has completed
};

}  // namespace pg_rdma::transport
