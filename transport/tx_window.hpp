// Sender-side views of the two byte rings a write passes through:
//   PeerRingWindow - the peer's RX ring, as far as its CreditUpdates tell;
//   TxStaging      - our registered staging buffer, filled by write() and
//                    released in order as signalled send completions arrive.
// Both are cumulative counters like RxRing, with their positions in the
// ring kept beside them rather than divided out at every look (see
// rx_ring.hpp).
#pragma once

#include <algorithm>
#include <cstdint>

#include "transport/ring_offset.hpp"

namespace pg_rdma::transport {

class PeerRingWindow {
public:
    void reset(std::uint32_t size) {
        size_ = size;
        written_ = peer_consumed_ = 0;
        write_offset_ = 0;
    }

    // How many bytes the next write may put into the peer's ring without
    // overwriting unread data or crossing the ring's end.
    [[nodiscard]] std::uint32_t writable_contiguous() const { return before_end(writable()); }
    // The same, past the end and on from the start (feature::kRingWrap).
    // 0 for a ring not yet known (size 0).
    [[nodiscard]] std::uint32_t writable() const {
        return static_cast<std::uint32_t>(size_ - (written_ - peer_consumed_));
    }
    // Of `len` bytes written at write_offset(), those before the ring's end.
    [[nodiscard]] std::uint32_t before_end(std::uint32_t len) const {
        return std::min(len, size_ - write_offset_);
    }
    // written % size.
    [[nodiscard]] std::uint32_t write_offset() const { return write_offset_; }
    // `len` at most the ring's size (an honest write: at most
    // writable()).
    void on_written(std::uint32_t len) {
        written_ += len;
        write_offset_ = ring_advance(write_offset_, len, size_);
    }

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
    std::uint32_t write_offset_ = 0;
};

// The first of the (at most two) pieces of `len` staging bytes from
// `offset` in a buffer of `size`: up to its end. The rest, if any, lies
// from the buffer's start. Every user of the split (the copy in, each
// link's write) asks here.
[[nodiscard]] inline std::uint32_t first_piece(std::uint32_t offset, std::uint32_t len, std::uint32_t size) {
    return std::min(len, size - offset);
}

class TxStaging {
public:
    explicit TxStaging(std::uint32_t size) : size_(size) {}

    // Up to `want` bytes that can be filled in one copy at offset().
    [[nodiscard]] std::uint32_t contiguous_free(std::uint32_t want) const {
        const std::uint64_t free = size_ - (head_ - tail_);
        return static_cast<std::uint32_t>(
            std::min<std::uint64_t>({want, free, size_ - offset_}));
    }
    // Up to `want` bytes that can be filled from offset() on, running past
    // the end to the start (in two pieces: first_piece()).
    [[nodiscard]] std::uint32_t free_space(std::uint32_t want) const {
        return static_cast<std::uint32_t>(std::min<std::uint64_t>(want, size_ - (head_ - tail_)));
    }
    // head % size.
    [[nodiscard]] std::uint32_t offset() const { return offset_; }
    // Where head - `back` lies (`back` at most size): the start of bytes
    // filled last.
    [[nodiscard]] std::uint32_t offset_before(std::uint32_t back) const {
        return back <= offset_ ? offset_ - back : offset_ + size_ - back;
    }
    // `len` at most the buffer's size (at most free_space() when the
    // bytes were copied in).
    void fill(std::uint32_t len) {
        head_ += len;
        offset_ = ring_advance(offset_, len, size_);
    }
    // Everything before `position` (a past head()) has been sent.
    void release_to(std::uint64_t position) { tail_ = std::max(tail_, position); }

    [[nodiscard]] std::uint64_t head() const { return head_; }
    [[nodiscard]] std::uint64_t in_use() const { return head_ - tail_; }
    [[nodiscard]] std::uint32_t size() const { return size_; }

private:
    std::uint32_t size_;
    std::uint64_t head_ = 0;  // bytes filled
    std::uint64_t tail_ = 0;  // bytes whose send has completed
    std::uint32_t offset_ = 0;  // head % size
};

}  // namespace pg_rdma::transport
