// What Stream needs from the connection underneath it: post work requests,
// reap completions, and learn that the peer went away. Endpoint is the real
// one (verbs and rdma_cm); tests/fake_link.hpp is an in-memory pair, so
// Stream's own logic (handshake, flow control, liveness, readiness, drain)
// is unit tested on machines without RDMA.
//
// Semantics every implementation keeps, as RC verbs do:
//   - a message (SEND or WRITE WITH IMM) consumes one posted receive at the
//     peer and completes there with that receive's wr_id (kRecvWrFlag | slot);
//   - a signalled send completes locally once the peer's device acknowledged
//     it, in posting order, whether or not the peer's process runs;
//   - a zero-length RDMA WRITE (post_probe) consumes nothing at the peer;
//   - a WRITE WITH IMM, and a SEND posted `solicited`, carries the
//     Solicited Event bit: its receive completion is solicited; every send
//     completion is not, failed ones included (rxe's way; the IB spec
//     would make those solicited);
//   - completion_fd() turns readable once after arm() when a completion
//     arrives (arm(true): a solicited one), and stays readable until
//     take_completion_event(); arm(false) on a CQ armed with arm(true)
//     widens it to every completion; event_fd() when a connection event
//     (disconnect) waits.
#pragma once

#include <infiniband/verbs.h>

#include <string>

#include <cstddef>
#include <cstdint>
#include <span>

#include "protocol/control.hpp"
#include "transport/settings.hpp"

namespace pg_rdma::transport {

// Bits of wr_id: receive WRs carry their slot, send WRs their sequence number.
inline constexpr std::uint64_t kRecvWrFlag = 1ull << 63;

// One WRITE of a message: `len` staging bytes from `staging_offset` into
// the peer's memory at `remote_addr`. When staging_may_wrap(), they may run
// past the staging buffer's end and go on from its start.
struct RingWrite {
    std::uint32_t staging_offset = 0;
    std::uint32_t len = 0;
    std::uint64_t remote_addr = 0;
    std::uint64_t wr_id = 0;
    bool signalled = false;
};
// A message is written as one WRITE WITH IMM, preceded by a plain WRITE
// when it crosses the end of the peer's ring.
inline constexpr std::size_t kMaxWritesPerMessage = 2;

class Link {
public:
    virtual ~Link() = default;
    Link() = default;
    Link(const Link&) = delete;
    Link& operator=(const Link&) = delete;

    virtual bool post_recv(std::uint32_t slot) = 0;
    // One message's writes, posted together: each but the last a plain RDMA
    // WRITE, the last a WRITE WITH IMM carrying `imm` (at most two: the
    // message crosses the end of the peer's ring, feature::kRingWrap).
    virtual bool post_write_imm(std::span<const RingWrite> writes, std::uint32_t rkey, std::uint32_t imm) = 0;
    virtual bool post_control(std::uint32_t slot, const protocol::ControlBytes& bytes, std::uint64_t wr_id,
                              bool signalled, bool solicited) = 0;
    virtual bool post_probe(std::uint64_t remote_addr, std::uint32_t rkey, std::uint64_t wr_id) = 0;

    // Non-blocking: how many completions were written into `out`, -1 on error.
    virtual int poll(std::span<ibv_wc> out) = 0;
    // Consumes the completion fd's event, leaving the CQ unarmed.
    virtual void take_completion_event() = 0;
    // Asks for an event on the next completion (solicited_only: the next
    // solicited one); poll() again after, since completions that arrived
    // before the call raise none. False with errno.
    virtual bool arm(bool solicited_only) = 0;
    [[nodiscard]] virtual int completion_fd() const = 0;
    [[nodiscard]] virtual int event_fd() const = 0;
    // Consumes waiting connection events; true if one says the peer is gone
    // (disconnected, or the device went away).
    virtual bool take_peer_gone_event() = 0;
    // Whether one of those events said this end's device is being removed
    // (not the peer leaving): for the failure's reason.
    [[nodiscard]] virtual bool device_removed() const { return false; }
    // Starts the disconnect (the peer sees it as an event).
    virtual void disconnect() = 0;

    [[nodiscard]] virtual std::uint8_t* rx_ring() const = 0;
    [[nodiscard]] virtual std::uint8_t* staging() const = 0;
    // Whether one WRITE may gather its bytes from both ends of the staging
    // buffer (two scatter/gather entries). Without it a write that reaches
    // the end is cut there, and in a stream whose offsets are not aligned
    // to the writes (any real one) that is one extra WRITE, completion and
    // wakeup at the peer per buffer's worth of bytes.
    [[nodiscard]] virtual bool staging_may_wrap() const = 0;
    [[nodiscard]] virtual const std::uint8_t* control_rx_slot(std::uint32_t slot) const = 0;
    [[nodiscard]] virtual protocol::XferMemory rx_ring_announcement() const = 0;
    [[nodiscard]] virtual const Settings& settings() const = 0;
    // The RDMA device's name ("rxe0"), for logs and pg_stat_rdma.
    [[nodiscard]] virtual std::string device_name() const = 0;
};

}  // namespace pg_rdma::transport
