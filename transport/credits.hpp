// Receive-WR credits: every message (SEND or RDMA WRITE WITH IMM) consumes
// one receive work request at the peer. A sender that posts without a credit
// would cause an RNR NAK; with credits it never does, so rnr_retry can stay
// small and a bug shows up as an error instead of a stall.
//
// Counts are cumulative and 32-bit on the wire (CreditUpdate.credits_granted),
// compared with wrap-safe unsigned arithmetic.
//
// Deadlock freedom: data may only use credits above kControlReserve, so a
// side can always send the CreditUpdate or Close its peer waits for; the
// receiver grants again as soon as the peer's remaining credits drop to half
// the queue, which happens long before the reserve is touched.
#pragma once

#include <cstdint>

namespace pg_rdma::transport {

inline constexpr std::uint32_t kControlReserve = 2;  // credits kept for control messages

// Before negotiation neither side knows the other's queue depth; both post
// at least protocol::kMinCredits receives, and the handshake sends fewer.
inline constexpr std::uint32_t kBootstrapCredits = 4;

class SendCredits {
public:
    // What the peer said it posted, in total; false if it went backwards or
    // claims more outstanding credits than any queue may have.
    [[nodiscard]] bool on_grant(std::uint32_t granted_total, std::uint32_t max_outstanding) {
        if (static_cast<std::int32_t>(granted_total - granted_) < 0) return false;
        if (granted_total - used_ > max_outstanding) return false;
        granted_ = granted_total;
        return true;
    }
    [[nodiscard]] std::uint32_t available() const { return granted_ - used_; }
    [[nodiscard]] bool can_send_data() const { return available() > kControlReserve; }
    [[nodiscard]] bool can_send_control() const { return available() > 0; }
    void use() { ++used_; }

private:
    std::uint32_t granted_ = kBootstrapCredits;
    std::uint32_t used_ = 0;
};

class RecvCredits {
public:
    explicit RecvCredits(std::uint32_t depth) : depth_(depth), posted_(depth), announced_(depth) {}

    // A message from the peer arrived. False if the peer used a credit it was
    // never given (it ignored the protocol; the receive would have RNR'd).
    [[nodiscard]] bool on_received() {
        if (announced_ - received_ == 0) return false;
        ++received_;
        return true;
    }
    void on_reposted() { ++posted_; }

    [[nodiscard]] bool grant_due() const {
        return posted_ != announced_ && peer_remaining() <= depth_ / 2;
    }
    // The value for CreditUpdate.credits_granted; records it as announced.
    std::uint32_t take_grant() {
        announced_ = posted_;
        return posted_;
    }
    [[nodiscard]] std::uint32_t peer_remaining() const { return announced_ - received_; }
    [[nodiscard]] std::uint32_t announced() const { return announced_; }

private:
    std::uint32_t depth_;
    std::uint32_t posted_;     // receive WRs posted for the peer, in total
    std::uint32_t announced_;  // posted_ as last told to the peer
    std::uint32_t received_ = 0;
};

}  // namespace pg_rdma::transport
