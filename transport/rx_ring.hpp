// Receiver-side accounting of the RX ring the peer writes into.
//
// All counters are cumulative byte counts since the connection started, so
// positions in the ring are `count % size` and no counter ever wraps in
// practice (2^64 bytes). Those positions are kept beside the counters and
// moved with them: a 64-bit division at every look costs tens of cycles on
// a real CPU and a helper call under emulation, on the path of every
// message. Invariant: announced <= consumed <= produced and
// produced - consumed <= size. A write may cross the end of the ring only
// where both ends agreed on feature::kRingWrap; on_write() rejects a peer
// that does otherwise.
#pragma once

#include <algorithm>
#include <cstdint>

#include "transport/ring_offset.hpp"

namespace pg_rdma::transport {

class RxRing {
public:
    // A CreditUpdate is due once this fraction of the ring has been consumed
    // since the last one. At a half the writer still sees at least half the
    // ring minus unread bytes, room for a 64 KiB message in the default 256
    // KiB ring whenever the reader keeps up; at a quarter a stream of 64 KiB
    // messages cost the reader a CreditUpdate per message (counted A/B: the
    // reader's CPU per 64 KiB and 1 MiB message 0.81 of the quarter's).
    static constexpr std::uint32_t kAnnounceFraction = 2;

    explicit RxRing(std::uint32_t size) : size_(size) {}

    // The peer wrote `len` bytes at offset produced % size, past the end
    // and on from the start if `may_cross_end`. False when that is not a
    // write an honest peer can make (empty, overflow, crosses the end).
    [[nodiscard]] bool on_write(std::uint32_t len, bool may_cross_end) {
        if (len == 0 || len > size_ - unread()) return false;
        if (!may_cross_end && write_offset_ + len > size_) return false;
        produced_ += len;
        write_offset_ = ring_advance(write_offset_, len, size_);
        return true;
    }

    [[nodiscard]] std::uint64_t unread() const { return produced_ - consumed_; }
    [[nodiscard]] std::uint32_t read_offset() const { return read_offset_; }
    [[nodiscard]] std::uint32_t write_offset() const { return write_offset_; }
    // Bytes readable in one copy, from read_offset().
    [[nodiscard]] std::uint32_t contiguous_unread() const {
        return static_cast<std::uint32_t>(std::min<std::uint64_t>(unread(), size_ - read_offset_));
    }

    void consume(std::uint32_t n) {
        const auto taken = static_cast<std::uint32_t>(std::min<std::uint64_t>(n, unread()));
        consumed_ += taken;
        read_offset_ = ring_advance(read_offset_, taken, size_);
    }

    [[nodiscard]] bool announce_due() const {
        return consumed_ - announced_ >= size_ / kAnnounceFraction;
    }
    // The value to put in CreditUpdate.rx_consumed; records it as announced.
    std::uint64_t take_announcement() {
        announced_ = consumed_;
        return consumed_;
    }

    [[nodiscard]] std::uint64_t produced() const { return produced_; }
    [[nodiscard]] std::uint64_t consumed() const { return consumed_; }
    [[nodiscard]] std::uint32_t size() const { return size_; }

private:
    std::uint32_t size_;
    std::uint64_t produced_ = 0;   // bytes the peer has written
    std::uint64_t consumed_ = 0;   // bytes the application has read
    std::uint64_t announced_ = 0;  // consumed value last sent to the peer
    std::uint32_t read_offset_ = 0;   // consumed % size
    std::uint32_t write_offset_ = 0;  // produced % size
};

}  // namespace pg_rdma::transport
