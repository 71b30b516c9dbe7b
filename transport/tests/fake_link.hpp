// An in-memory pair of Links for host unit tests of Stream (link.hpp states
// the semantics kept). The two ends share a FakeWire; what the RDMA device
// would do happens at once, inside the post call, whether or not the other
// end's Stream ever runs: that is exactly the property liveness depends on.
//
// The wire can fail the way networks and peers do:
//   cut()        the peer's host vanished: nothing is delivered or
//                acknowledged any more, and nobody is told
//   disconnect   (Link::disconnect from either end) both ends get a
//                peer-gone event, as rdma_cm's DISCONNECTED
// Pure userspace: the "completion channel" and "cm channel" are eventfds.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "transport/event_set.hpp"
#include "transport/link.hpp"
#include "transport/stream.hpp"

namespace pg_rdma::test {

using transport::Link;
using transport::Settings;

struct FakeWire;

class FakeLink final : public Link {
public:
    FakeLink(std::shared_ptr<FakeWire> wire, int side, const Settings& settings);
    ~FakeLink() override;

    bool post_recv(std::uint32_t slot) override;
    bool post_write_imm(std::span<const transport::RingWrite> writes, std::uint32_t rkey, std::uint32_t imm) override;
    bool post_control(std::uint32_t slot, const protocol::ControlBytes& bytes, std::uint64_t wr_id,
                      bool signalled, bool solicited) override;
    bool post_probe(std::uint64_t remote_addr, std::uint32_t rkey, std::uint64_t wr_id) override;
    int poll(std::span<ibv_wc> out) override;
    void take_completion_event() override;
    bool arm(bool solicited_only) override;
    // Whether the next completion would signal completion_fd(); with
    // armed_solicited_only(), only a solicited one would.
    [[nodiscard]] bool armed() const { return armed_; }
    [[nodiscard]] bool armed_solicited_only() const { return armed_ && solicited_only_; }
    // Completion events raised (an armed CQ's first completion) and taken.
    [[nodiscard]] int events_raised() const { return events_raised_; }
    [[nodiscard]] int events_taken() const { return events_taken_; }
    // Data writes gathered from both ends of the staging buffer.
    [[nodiscard]] int wrapped_writes() const { return wrapped_writes_; }
    // Messages written across the end of the peer's ring (two writes).
    [[nodiscard]] int ring_wrapped_messages() const { return ring_wrapped_messages_; }
    // Writes of such messages that also gathered from both ends of staging.
    [[nodiscard]] int gathered_ring_pieces() const { return gathered_ring_pieces_; }
    [[nodiscard]] int completion_fd() const override { return completion_fd_.get(); }
    [[nodiscard]] int event_fd() const override { return event_fd_.get(); }
    bool take_peer_gone_event() override;
    void disconnect() override;

    [[nodiscard]] std::uint8_t* rx_ring() const override { return rx_ring_.get(); }
    [[nodiscard]] std::uint8_t* staging() const override { return local_.get(); }
    [[nodiscard]] bool staging_may_wrap() const override;
    [[nodiscard]] const std::uint8_t* control_rx_slot(std::uint32_t slot) const override;
    [[nodiscard]] protocol::XferMemory rx_ring_announcement() const override;
    [[nodiscard]] const Settings& settings() const override { return settings_; }
    [[nodiscard]] std::string device_name() const override { return "fake0"; }

    // Counters a test can check.
    [[nodiscard]] std::uint64_t probes_posted() const { return probes_posted_; }
    [[nodiscard]] std::size_t receives_posted() const { return posted_recvs_.size(); }
    // Send WRs posted whose completion has not been polled (nor one after them).
    [[nodiscard]] std::uint64_t sends_outstanding() const { return sends_posted_ - sends_retired_; }

private:
    friend struct FakeWire;
    FakeLink* peer() const;
    // Adds a completion; signals when armed for it (send completions are
    // never solicited, as with rxe).
    void complete(const ibv_wc& wc, bool solicited = false);
    ibv_wc* take_receive(std::uint32_t& slot);
    bool send(std::uint64_t wr_id, bool signalled, bool solicited, ibv_wc_opcode opcode, bool consumes_receive,
              const std::uint8_t* data, std::uint32_t len, std::uint32_t imm, std::uint64_t remote_addr,
              std::uint32_t rkey);

    std::shared_ptr<FakeWire> wire_;
    int side_;
    Settings settings_;
    std::unique_ptr<std::uint8_t[]> rx_ring_;
    std::unique_ptr<std::uint8_t[]> local_;  // staging, then control RX slots
    std::uint32_t rkey_;
    std::deque<std::uint32_t> posted_recvs_;
    std::deque<ibv_wc> cq_;
    bool armed_ = true;
    bool solicited_only_ = false;
    int events_raised_ = 0;
    int events_taken_ = 0;
    int wrapped_writes_ = 0;
    int ring_wrapped_messages_ = 0;
    int gathered_ring_pieces_ = 0;
    bool gone_event_ = false;
    std::uint64_t probes_posted_ = 0;
    // Send WRs posted, and those retired by a completion polled (wr_id is
    // the sender's sequence number): a post beyond the send queue's depth
    // fails as ibv_post_send does.
    std::uint64_t sends_posted_ = 0;
    std::uint64_t sends_retired_ = 0;
    transport::FileDescriptor completion_fd_;  // eventfd
    transport::FileDescriptor event_fd_;       // eventfd
};

struct FakeWire {
    std::array<FakeLink*, 2> ends{nullptr, nullptr};
    bool cut = false;           // the host vanished: drop everything silently
    bool disconnected = false;  // rdma_disconnect happened
    bool refuse_posts = false;  // the device refuses every send post (ibv_post_send fails: ENOMEM)
    // Feature bits a GetServerFeature keeps on its way: less than all makes
    // the active side look like an older build that does not know them.
    std::uint64_t offer_features = ~0ull;
    // Whether a write may gather from both ends of the staging buffer
    // (Link::staging_may_wrap), as every real RC device can; read when a
    // Stream starts.
    bool staging_may_wrap = true;
};

// Two connected fake links.
struct FakePair {
    std::shared_ptr<FakeWire> wire = std::make_shared<FakeWire>();
    std::unique_ptr<FakeLink> a, b;
    explicit FakePair(const Settings& sa = Settings{}, const Settings& sb = Settings{});
};

// Two Streams over a FakePair, established: both ends through the whole
// handshake, stepped alternately in this thread (Catch2 REQUIREs on failure).
struct Streams {
    FakePair pair;
    FakeLink* link_a;
    FakeLink* link_b;
    std::unique_ptr<transport::Stream> a, b;
};
// `offer_features`: FakeWire::offer_features during the handshake;
// `staging_may_wrap`: FakeWire's.
std::unique_ptr<Streams> establish(const Settings& sa = Settings{}, const Settings& sb = Settings{},
                                   std::uint64_t offer_features = ~0ull, bool staging_may_wrap = true);

}  // namespace pg_rdma::test
