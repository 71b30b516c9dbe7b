// Send-queue occupancy and selective signalling.
//
// Only some send WRs ask for a completion; a completion for WR n means every
// WR up to n finished (RC completes in order), so it frees their queue slots
// and the staging bytes they used. A WR is signalled when
//   - kSignalEvery - 1 unsignalled WRs precede it (bounded run), or
//   - the queue would be half full after it, or
//   - the caller forces it (staging more than half used, Close, drain).
// Example, depth 64, kSignalEvery 16: WRs 15, 31, 47 ... are signalled in a
// steady stream; if the queue fills, one of the last 16 WRs is signalled, so
// a completion that frees room is always on its way: no write can block on a
// queue that never drains.
#pragma once

#include <cstdint>
#include <vector>

#include "transport/ring_offset.hpp"

namespace pg_rdma::transport {

class SendQueue {
public:
    static constexpr std::uint32_t kSignalEvery = 16;  // WRs per signalled WR at most

    explicit SendQueue(std::uint32_t depth) : depth_(depth), staging_end_(depth, 0) {}

    // Room for `wrs` more WRs.
    [[nodiscard]] bool has_room(std::uint32_t wrs = 1) const { return outstanding() + wrs <= depth_; }
    [[nodiscard]] std::uint32_t outstanding() const {
        return static_cast<std::uint32_t>(posted_ - completed_);
    }
    [[nodiscard]] bool idle() const { return posted_ == completed_; }
    [[nodiscard]] bool completed(std::uint64_t seq) const { return seq < completed_; }

    // Whether the next WR must be signalled (see the header comment), when
    // `ahead` unsignalled WRs go before it in the same post.
    [[nodiscard]] bool must_signal(bool force, std::uint32_t ahead = 0) const {
        return force || unsignalled_run_ + ahead + 1 >= kSignalEvery || outstanding() + ahead + 1 >= depth_ / 2;
    }

    // Records a posted WR and returns its sequence number (use it as wr_id).
    // `staging_head` is the staging position after this WR's bytes.
    std::uint64_t on_posted(bool signalled, std::uint64_t staging_head) {
        const std::uint64_t seq = posted_++;
        staging_end_[next_slot_] = staging_head;
        next_slot_ = ring_advance(next_slot_, 1, depth_);
        unsignalled_run_ = signalled ? 0 : unsignalled_run_ + 1;
        return seq;
    }

    // A signalled WR completed; returns the staging position now free up to.
    std::uint64_t on_completed(std::uint64_t seq) {
        if (seq + 1 > completed_) completed_ = seq + 1;
        return staging_end_[slot(seq)];
    }

    // The slot index of a WR (control messages use it for their buffer).
    [[nodiscard]] std::uint32_t slot(std::uint64_t seq) const {
        return static_cast<std::uint32_t>(seq % depth_);
    }
    [[nodiscard]] std::uint64_t next_seq() const { return posted_; }
    // slot(next_seq()), kept beside posted_: no division on every post.
    [[nodiscard]] std::uint32_t next_slot() const { return next_slot_; }

private:
    std::uint32_t depth_;
    std::uint64_t posted_ = 0;
    std::uint64_t completed_ = 0;
    std::uint32_t next_slot_ = 0;  // posted_ % depth_
    std::uint32_t unsignalled_run_ = 0;
    std::vector<std::uint64_t> staging_end_;  // by slot: staging head after that WR
};

}  // namespace pg_rdma::transport
