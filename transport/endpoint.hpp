// The verbs resources of one connection and the work requests posted on
// them: the real Link (link.hpp). No stream logic lives here: Endpoint posts
// and polls, Stream decides what to post.
//
// Memory layout (two registrations, so only the RX ring is remotely writable):
//   rx_ring_  LOCAL_WRITE | REMOTE_WRITE, rx_buffer_size bytes: the peer's
//             RDMA WRITEs land here; its rkey goes out in RegisterXferMemory
//   local_    LOCAL_WRITE only:
//               [ TX staging | control RX slots (credits x 32 B) |
//                 control TX slots (send_queue_depth x 32 B) ]
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "protocol/control.hpp"
#include "transport/link.hpp"
#include "transport/error.hpp"
#include "transport/pinned_buffer.hpp"
#include "transport/settings.hpp"
#include "transport/verbs_raii.hpp"

namespace pg_rdma::transport {

class Endpoint final : public Link {
public:
    // Takes an id whose route is resolved (active side) or that came with a
    // CONNECT_REQUEST (passive side), with the event channel it reports to.
    // Creates everything and posts every receive, ready for rdma_connect or
    // rdma_accept. Checks RLIMIT_MEMLOCK first.
    //
    // In a process whose librdmacm descriptors are a parent's
    // (cm_events.hpp, verbs_inherited_from_parent), everything is made on a
    // device context of the connection's own instead of librdmacm's, and
    // the queue pair is one rdma_cm does not know: the active side then
    // passes its number to rdma_connect, and on InfiniBand and RoCE
    // (brings_up_own_queue_pair()) waits for RDMA_CM_EVENT_CONNECT_RESPONSE,
    // which comes instead of ESTABLISHED, and calls establish(). On iWARP
    // the kernel's iw_cm finds the queue pair by its number and brings it
    // up itself, and ESTABLISHED comes as usual.
    static std::unique_ptr<Endpoint> create(CmChannelPtr channel, CmIdPtr id,
                                            const Settings& settings, Error& err);
    ~Endpoint() override;

    // Pinned bytes a connection with these settings needs.
    static std::size_t pinned_bytes(const Settings& settings);

    bool post_recv(std::uint32_t slot) override;
    bool post_write_imm(std::span<const RingWrite> writes, std::uint32_t rkey, std::uint32_t imm) override;
    bool post_control(std::uint32_t slot, const protocol::ControlBytes& bytes, std::uint64_t wr_id,
                      bool signalled, bool solicited) override;
    // A liveness probe: a signalled zero-length RDMA WRITE (no immediate) to
    // the peer's ring. It consumes no receive WR and no credit, and the
    // peer's RDMA device acknowledges it without the peer process running,
    // so a live peer that does not call in still proves itself alive, while
    // a vanished host leaves it unacknowledged (C9-88: a zero-length write
    // touches no memory).
    bool post_probe(std::uint64_t remote_addr, std::uint32_t rkey, std::uint64_t wr_id) override;

    // Non-blocking: returns how many completions were written into `out`.
    int poll(std::span<ibv_wc> out) override;
    // The channel holds at most one event: the CQ is armed again only after
    // its event was taken. A second one (a queue armed for solicited
    // completions that fired unnoticed and was then armed wider) keeps the
    // channel readable and is taken next time: one spurious wakeup.
    void take_completion_event() override;
    // ibv_req_notify_cq for the next completion, or the next solicited one.
    // Call poll() afterwards: completions that raced with it are there.
    bool arm(bool solicited_only) override;

    // Whether the queue pair is ours rather than rdma_cm's, on a device
    // whose connection manager leaves it to us to bring up (above).
    [[nodiscard]] bool brings_up_own_queue_pair() const {
        return own_qp_ != nullptr && own_context_->device->transport_type != IBV_TRANSPORT_IWARP;
    }
    [[nodiscard]] std::uint32_t queue_pair_number() const { return qp_raw_->qp_num; }
    // When brings_up_own_queue_pair(), after RDMA_CM_EVENT_CONNECT_RESPONSE:
    // brings the queue pair to ready-to-receive and ready-to-send with the
    // attributes rdma_cm worked out for the connection (remote access
    // included), then rdma_establish (which lets the passive side's
    // ESTABLISHED come). Otherwise nothing is left to do.
    bool establish(Error& err);

    [[nodiscard]] rdma_cm_id* id() const { return id_.get(); }
    [[nodiscard]] rdma_event_channel* cm_channel() const { return cm_channel_.get(); }
    [[nodiscard]] int completion_fd() const override { return comp_channel_->fd; }
    [[nodiscard]] int event_fd() const override { return cm_channel_->fd; }
    bool take_peer_gone_event() override;
    [[nodiscard]] bool device_removed() const override { return device_removed_; }
    void disconnect() override;

    [[nodiscard]] std::uint8_t* rx_ring() const override { return rx_ring_.data(); }
    [[nodiscard]] std::uint8_t* staging() const override { return local_.data(); }
    [[nodiscard]] bool staging_may_wrap() const override { return write_pieces_ >= kWrapPieces; }
    [[nodiscard]] const std::uint8_t* control_rx_slot(std::uint32_t slot) const override;
    [[nodiscard]] protocol::XferMemory rx_ring_announcement() const override;
    [[nodiscard]] const Settings& settings() const override { return settings_; }
    [[nodiscard]] std::string device_name() const override;
    // Bytes a write may carry inline, as the device granted (at most
    // settings().max_inline).
    [[nodiscard]] std::uint32_t inline_limit() const { return inline_limit_; }

private:
    explicit Endpoint(const Settings& settings) : settings_(settings) {}
    bool create_queues(Error& err);
    bool create_queue_pair(ibv_qp_init_attr& attr, Error& err);
    // Our own queue pair to `state`, with rdma_cm's attributes for it.
    bool move_own_queue_pair(ibv_qp_state state, const char* what, Error& err);
    bool create_buffers(Error& err);
    bool post_all_receives(Error& err);
    bool post_send(ibv_send_wr& wr);
    // IBV_SEND_SIGNALED and IBV_SEND_SOLICITED when asked, IBV_SEND_INLINE
    // when len fits.
    [[nodiscard]] unsigned send_flags(std::uint32_t len, bool signalled, bool solicited) const;
    [[nodiscard]] std::uint8_t* control_tx_slot(std::uint32_t slot) const;

    Settings settings_;
    std::uint32_t inline_limit_ = 0;  // bytes a write may carry inline, as granted
    // A write that wraps in staging is two pieces: its tail, then the start.
    static constexpr int kWrapPieces = 2;
    int write_pieces_ = 1;  // scatter/gather entries a data write may have
    // Declaration order is creation order; members are destroyed in reverse
    // (QP first, event channel last), see verbs_raii.hpp.
    CmChannelPtr cm_channel_;
    CmIdPtr id_;
    ContextPtr own_context_;  // only where librdmacm's contexts are a parent's
    PdPtr pd_;
    CompChannelPtr comp_channel_;
    CqPtr cq_;
    PinnedBuffer rx_ring_;
    PinnedBuffer local_;
    CmQp qp_;      // rdma_cm's, or
    QpPtr own_qp_;  // ours, on own_context_
    bool device_removed_ = false;  // an RDMA_CM_EVENT_DEVICE_REMOVAL came
    ibv_qp* qp_raw_ = nullptr;  // whichever of the two exists
};

}  // namespace pg_rdma::transport
