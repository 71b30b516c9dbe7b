// Completions, control messages and posting for Stream (see stream.hpp).
#include <arpa/inet.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>
#include <type_traits>
#include <variant>

#include "transport/stream.hpp"

namespace pg_rdma::transport {
namespace {

constexpr int kPollBatch = 16;                       // completions per ibv_poll_cq
constexpr std::uint32_t kMaxWriteBytes = 64 * 1024;  // bytes per RDMA WRITE

int errno_for(ibv_wc_status status) {
    switch (status) {
        case IBV_WC_WR_FLUSH_ERR: return ECONNRESET;   // QP went to error: peer gone
        case IBV_WC_RETRY_EXC_ERR: return ETIMEDOUT;   // peer stopped acknowledging
        case IBV_WC_RNR_RETRY_EXC_ERR:                 // credits were violated
        case IBV_WC_REM_ACCESS_ERR:
        case IBV_WC_REM_INV_REQ_ERR:
        case IBV_WC_REM_OP_ERR: return EPROTO;
        default: return EIO;
    }
}

}  // namespace

void Stream::fail(int code) {
    if (error_ != 0) return;
    error_ = code;
    // The caller's next call moves the session onto TCP (over_tcp()); the
    // data path stops here, as for any failure.
    if (failover_eligible(code)) {
        failover_wanted_ = true;
        return;
    }
    // Tell the peer now rather than at close: a protocol violation or a dead
    // keepalive ends the connection for both sides.
    if (code != ECONNRESET) link_->disconnect();
}

bool Stream::protocol_error(std::string_view why) {
    if (failure_reason_.empty()) failure_reason_ = why;
    fail(EPROTO);
    return false;
}

void Stream::on_peer_gone() {
    // After the peer's Close the disconnect is its normal goodbye; before it,
    // the stream was cut short.
    if (peer_bytes_sent_) {
        peer_disconnected_ = true;
    } else {
        if (failure_reason_.empty()) failure_reason_ = "the peer disconnected without closing";
        fail(ECONNRESET);
    }
}

bool Stream::progress() {
    // One epoll_wait says which sources have something, so an idle call
    // costs one system call.
    poll_completions();
    return take_in(events_.pending());
}

bool Stream::take_in(unsigned pending) {
    // Every step runs even after a failure, so events are consumed and fd()
    // reports the failure as readiness. A hold goes first: a keepalive
    // probe must not take a send queue slot it needs.
    end_hold();
    if ((pending & EventSet::kTick) != 0 && events_.take_tick()) handle_keepalive_tick();
    if ((pending & EventSet::kCm) != 0) handle_cm_events();
    // After completions and rdma_cm events: the peer's Close comes before
    // its socket's end.
    if ((pending & EventSet::kTcp) != 0) {
        poll_completions();
        on_tcp_event();
    }
    if ((pending & EventSet::kCompletion) != 0) {
        // Neither taken nor armed again here, only where fd() is about to
        // signal nothing (update_readiness): completions met while awake
        // raise no event, and the event left in the channel keeps fd()
        // readable meanwhile, which saves the eventfd's write and read.
        cq_armed_ = false;
        if ((pending & EventSet::kUnsure) != 0) {
            // The look failed, so there may be no event to keep fd()
            // readable: take it now if it is there, and let the eventfd
            // signal.
            link_->take_completion_event();
            completion_event_pending_ = false;
        } else {
            completion_event_pending_ = true;
        }
        poll_completions();  // what arrived after the first poll
    }
    flush_control();
    update_readiness();
    return error_ == 0;
}

bool Stream::poll_completions() {
    std::array<ibv_wc, kPollBatch> wcs;  // filled by ibv_poll_cq; no need to clear it on the hot path
    int n = kPollBatch;
    while (n == kPollBatch && error_ == 0) {
        n = link_->poll(wcs);
        if (n < 0) {
            fail(EIO);
            break;
        }
        for (int i = 0; i < n; ++i) {
            const ibv_wc& wc = wcs[static_cast<std::size_t>(i)];
            if (error_ == 0) {
                handle_completion(wc);
            } else if (failover_wanted_ && !salvage_completion(wc)) {
                // Taken out of the queue already: what follows a failure in
                // the same batch counts for the failover.
                salvage_broken_ = true;
            }
        }
    }
    return error_ == 0;
}

bool Stream::handle_completion(const ibv_wc& wc) {
    if (wc.status != IBV_WC_SUCCESS) {
        if (wc.status == IBV_WC_WR_FLUSH_ERR) {
            flushed_ = true;  // the queue pair is in error: nothing more completes
            on_peer_gone();
            return false;
        }
        if (failure_reason_.empty())
            failure_reason_ = wc.status == IBV_WC_RETRY_EXC_ERR
                                  ? "the peer's host stopped acknowledging (transport retry counter exceeded)"
                                  : ibv_wc_status_str(wc.status);
        fail(errno_for(wc.status));
        return false;
    }
    heard_since_tick_ = true;
    if ((wc.wr_id & kRecvWrFlag) != 0) return handle_receive(wc);
    staging_.release_to(sq_.on_completed(wc.wr_id));
    return true;
}

bool Stream::handle_receive(const ibv_wc& wc) {
    const auto slot = static_cast<std::uint32_t>(wc.wr_id & ~kRecvWrFlag);
    if (!recv_credits_.on_received()) return protocol_error("the peer sent without a credit");
    std::optional<protocol::ControlMessage> control;
    if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        if (!handle_data(ntohl(wc.imm_data))) return false;
    } else if (wc.opcode == IBV_WC_RECV && wc.byte_len == protocol::kControlMessageSize) {
        const auto decoded = protocol::decode_control({link_->control_rx_slot(slot), wc.byte_len});
        if (!decoded.is_ok()) return protocol_error(decoded.error);
        control = decoded.value;  // copied out: the slot is reposted next
    } else {
        return protocol_error("the peer sent a message of unexpected type or size");
    }
    if (!link_->post_recv(slot)) {
        fail(errno);
        return false;
    }
    recv_credits_.on_reposted();
    if (recv_credits_.grant_due()) credit_update_pending_ = true;
    return !control || handle_control(*control);
}

bool Stream::handle_data(std::uint32_t len) {
    if (phase_ != Phase::Established) return protocol_error("the peer wrote data before the handshake ended");
    if (peer_bytes_sent_) return protocol_error("the peer wrote data after its Close");
    if (!rx_.on_write(len, ring_wraps_)) return protocol_error("the peer wrote outside its window of the RX ring");
    sent_since_heard_ = false;
    if (slept_reply_since_) end_slept_reply_wait();  // the backend's usual way: spin(), a sleep, this
    return true;
}

bool Stream::handle_control(const protocol::ControlMessage& msg) {
    ++stats_.control_received;
    return std::visit(
        [this](const auto& m) -> bool {
            using T = std::decay_t<decltype(m)>;
            if constexpr (std::is_same_v<T, protocol::FeatureOffer>) {
                return on_offer(m);
            } else if constexpr (std::is_same_v<T, protocol::FeatureAgreement>) {
                return on_agreement(m);
            } else if constexpr (std::is_same_v<T, protocol::XferMemory>) {
                return on_peer_ring(m);
            } else if constexpr (std::is_same_v<T, protocol::Keepalive>) {
                return true;  // its arrival was the point
            } else if constexpr (std::is_same_v<T, protocol::CreditUpdate>) {
                if (phase_ != Phase::Established) return protocol_error("CreditUpdate before the handshake ended");
                if (!send_credits_.on_grant(m.credits_granted, protocol::kMaxCredits) ||
                    !peer_.on_peer_consumed(m.rx_consumed))
                    return protocol_error("the peer sent an impossible CreditUpdate");
                return true;
            } else {
                return handle_peer_close(m);
            }
        },
        msg);
}

bool Stream::handle_peer_close(const protocol::CloseMessage& msg) {
    if (phase_ != Phase::Established) return protocol_error("Close before the handshake ended");
    if (peer_bytes_sent_) return protocol_error("the peer sent Close twice");
    // RC delivers in order, so every byte written before Close has landed.
    if (msg.bytes_sent != rx_.produced()) return protocol_error("the peer's Close does not match the bytes it wrote");
    if (!peer_.on_peer_consumed(msg.rx_consumed))
        return protocol_error("the peer's Close claims it consumed bytes never written");
    peer_bytes_sent_ = msg.bytes_sent;
    return true;
}

void Stream::handle_cm_events() {
    if (link_->take_peer_gone_event()) {
        if (link_->device_removed() && failure_reason_.empty())
            failure_reason_ = "this host's RDMA device " + link_->device_name() + " is being removed";
        poll_completions();  // a Close may have landed just before
        on_peer_gone();
    }
}

bool Stream::keepalive_agreed() const { return (stats_.features & protocol::feature::kKeepalive) != 0; }

void Stream::handle_keepalive_tick() {
    if (phase_ != Phase::Established || !keepalive_agreed()) return;
    // The data path only raises flags; the clock is read here, once a tick.
    const auto now = Clock::now();
    if (heard_since_tick_) keepalive_.on_evidence(now);
    if (sent_since_tick_) keepalive_.on_sent(now);
    heard_since_tick_ = sent_since_tick_ = false;
    switch (keepalive_.check(now)) {
        case KeepaliveClock::Verdict::Dead:
            if (failure_reason_.empty()) failure_reason_ = "nothing proved the peer alive within the keepalive timeout";
            fail(ETIMEDOUT);
            break;
        case KeepaliveClock::Verdict::SendKeepalive:
            // Its completion is the proof of life we are after.
            if (send_probe()) keepalive_.on_probe(now);
            break;
        case KeepaliveClock::Verdict::Alive: break;
    }
}

bool Stream::send_probe() {
    // Needs a send queue slot only: no credit, nothing at the peer that its
    // application would have to give back (see Endpoint::post_probe).
    if (!sq_.has_room()) return false;
    const std::uint64_t seq = sq_.next_seq();
    if (!link_->post_probe(peer_ring_addr_, peer_ring_rkey_, seq)) {
        fail(errno);
        return false;
    }
    sq_.on_posted(true, posted_staging_head());
    ++stats_.keepalive_probes;
    return true;
}

bool Stream::send_control(const protocol::ControlMessage& msg, bool force_signal) {
    if (!sq_.has_room() || !send_credits_.can_send_control()) return false;
    const std::uint64_t seq = sq_.next_seq();
    const bool signalled = sq_.must_signal(force_signal);
    // A credit grant wakes a peer that waits to write, which asks for every
    // completion (wants_every_completion), and not a reader asleep on
    // solicited ones: the rest do. But a CreditUpdate also uses one of our
    // credits, which the peer gives back only once it has polled it, and
    // only when our remaining credits are at most half its queue
    // (RecvCredits::grant_due). From there on ours wake it too, or a run of
    // CreditUpdates to a sleeping reader would leave us none for data.
    const bool solicited = !std::holds_alternative<protocol::CreditUpdate>(msg) ||
                           send_credits_.available() - 1 <= peer_credits_ / 2u;
    if (!link_->post_control(sq_.next_slot(), protocol::encode_control(msg, version_), seq, signalled, solicited)) {
        fail(errno);
        return false;
    }
    sq_.on_posted(signalled, posted_staging_head());
    send_credits_.use();
    sent_since_tick_ = true;
    ++stats_.control_sent;
    return true;
}

void Stream::post_due() {
    if (phase_ != Phase::Established || error_ != 0 || peer_disconnected_) return;
    // Held bytes go first: every call but a MSG_MORE write ends a hold. One
    // that waits for credits holds back the Close, which must count it, but
    // not the CreditUpdate.
    const bool nothing_held = post_held();
    if (error_ != 0) return;
    // Once close() runs nothing more will be read, so no more grants.
    if (credit_update_pending_ && !closing_ &&
        send_control(protocol::CreditUpdate{recv_credits_.take_grant(), rx_.take_announcement()}, false))
        credit_update_pending_ = false;
    if (close_queued_ && !close_sent_ && nothing_held) {
        const std::uint64_t seq = sq_.next_seq();
        if (send_control(protocol::CloseMessage{peer_.written(), rx_.consumed()}, true)) {
            close_sent_ = true;
            close_seq_ = seq;
        }
    }
}

bool Stream::data_room() const {
    // A message within kMaxWriteBytes of the end of the peer's ring may
    // cross it and take two WRs. The next message (or a hold's growth)
    // starts where the peer's ring was left, so this holds for any of them.
    const bool may_cross = ring_wraps_ && peer_.before_end(kMaxWriteBytes) < kMaxWriteBytes;
    return send_credits_.can_send_data() && sq_.has_room(may_cross ? kMaxWritesPerMessage : 1);
}

bool Stream::can_write_now() const {
    if (!data_room()) return false;
    // With bytes held, a write that cannot extend them posts them first:
    // progress either way, and the next look sees no hold.
    return held_ > 0 || hold_room(1) > 0;
}

std::uint32_t Stream::hold_room(std::uint32_t want) const {
    // Bytes added to a hold continue it in our staging buffer and in the
    // peer's ring, so that the hold goes out as one message.
    if (held_ > 0 && !staging_wraps_ && staging_.offset() == 0) return 0;  // the staging buffer wrapped
    const std::uint32_t window = ring_wraps_ ? peer_.writable() : peer_.writable_contiguous();
    if (window <= held_) return 0;
    const std::uint32_t room = std::min({want, kMaxWriteBytes - held_, window - held_});
    return staging_wraps_ ? staging_.free_space(room) : staging_.contiguous_free(room);
}

void Stream::fill_staging(const std::uint8_t* src, std::uint32_t len) {
    const std::uint32_t first = first_piece(staging_.offset(), len, staging_.size());
    std::memcpy(link_->staging() + staging_.offset(), src, first);
    if (first < len) std::memcpy(link_->staging(), src + first, len - first);
    staging_.fill(len);
}

std::uint32_t Stream::post_data(const std::uint8_t* src, std::uint32_t len, bool more) {
    // After a failure nothing more goes into staging: the failover resends
    // what is there, and bytes the caller is not told were taken must not
    // be among them. Nor for a peer that left: they could only be lost.
    if (error_ != 0 || peer_disconnected_) return 0;
    if (held_ > 0 && hold_room(len) == 0 && !post_held()) return 0;
    if (!data_room()) return 0;
    std::uint32_t chunk = hold_room(len);
    if (chunk < std::min(len, kMaxWriteBytes - held_)) {
        // Short of a whole WRITE: the completions of our last writes and the
        // peer's CreditUpdate may be waiting, with the room for the rest.
        // Cut without looking, a stream of 64 KiB messages whose offsets
        // are off the grid went out as a long and a short WRITE each.
        poll_completions();
        if (error_ != 0 || peer_disconnected_) return 0;
        chunk = hold_room(len);
    }
    if (chunk == 0) return 0;
    fill_staging(src, chunk);
    held_ += chunk;
    // A hold that cannot grow goes out now rather than at the next call.
    // A failed post loses the chunk, unless the failover will resend it:
    // then it counts as written (as in post_whole).
    if ((!more || hold_room(1) == 0) && !post_held() && error_ != 0 && !failover_wanted_) return 0;
    return chunk;
}

bool Stream::post_whole(const std::uint8_t* src, std::size_t len) {
    // What post_data() would take whole and post at once: the same room
    // (hold_room with nothing held) and the same credits and queue slot.
    if (held_ != 0 || len == 0 || len > kMaxWriteBytes || !data_room()) return false;
    const auto n = static_cast<std::uint32_t>(len);
    if (hold_room(n) != n) return false;
    fill_staging(src, n);
    held_ = n;
    (void)post_held();  // cannot be refused (checked above); a failure sets error_
    return true;
}

bool Stream::post_held() {
    if (held_ == 0) return true;
    if (error_ != 0 || !data_room()) return false;
    const std::uint32_t offset = staging_.offset_before(held_);
    const std::uint64_t start = staging_.head() - held_;
    // From half the staging buffer on, ask for a completion so it frees up
    // (at half: a 64 KiB hold in the default 128 KiB buffer must free its
    // room before the next one fills the rest).
    const bool force = staging_.in_use() >= staging_.size() / 2;
    // Up to the end of the peer's ring, and (ring_wraps_) the rest from its
    // start: the first write plain and never signalled, the message's
    // completion being the second's.
    const std::uint32_t to_end = peer_.before_end(held_);
    const bool split = to_end < held_;  // only with ring_wraps_: hold_room() kept it short otherwise
    const std::uint64_t seq = sq_.next_seq();
    const bool signalled = sq_.must_signal(force, split ? 1 : 0);
    const std::uint64_t here = peer_ring_addr_ + peer_.write_offset();
    std::array<RingWrite, kMaxWritesPerMessage> writes{};
    if (split) {
        writes[0] = {offset, to_end, here, seq, false};
        writes[1] = {ring_advance(offset, to_end, staging_.size()), held_ - to_end, peer_ring_addr_, seq + 1, signalled};
    } else {
        writes[0] = {offset, held_, here, seq, signalled};
    }
    if (!link_->post_write_imm({writes.data(), split ? 2u : 1u}, peer_ring_rkey_, held_)) {
        fail(errno);
        return false;
    }
    if (split) sq_.on_posted(false, start + to_end);
    sq_.on_posted(signalled, staging_.head());
    peer_.on_written(held_);
    send_credits_.use();
    sent_since_tick_ = sent_since_heard_ = true;
    ++stats_.writes_posted;
    stats_.bytes_sent += held_;
    held_ = 0;
    return true;
}

void Stream::work_out_readiness(Arm arm) {
    // fd() signals what its waiter wants: inside sleep_for() exactly that;
    // otherwise the interest set; without one, POLLOUT while a write waits
    // (a writer blocked with unread input must not wake at once) and
    // POLLIN the rest of the time.
    short signalled = 0;
    if (sleeping_for_) signalled = *sleeping_for_;
    else if (interest_) signalled = *interest_;
    else signalled = write_blocked_ ? POLLOUT : POLLIN;
    // A drain (signalled 0, after begin_close) wakes for events only: its
    // own check sees a failure, and a peer that hung up while our bytes
    // are unconfirmed must not keep fd() readable until the deadline.
    const bool draining = sleeping_for_ && *sleeping_for_ == 0;
    const auto mask = static_cast<short>(draining ? 0 : signalled | POLLERR | POLLHUP);
    bool ready = readiness(mask) != 0;
    // fd() may signal nothing only while the CQ is armed, or a completion
    // would not wake its sleeper. The CQ is armed here, at the last moment:
    // one armed while the caller is awake (or spinning) turns every
    // completion into a notification, which costs the kernel an interrupt
    // or, with rxe, a softirq thread's wakeup. Without kIfIdle a disarmed
    // CQ leaves fd() signalled: a caller that sleeps anyway wakes at once
    // and its next call arms.
    // A sleeper that only waits to read may arm for solicited completions
    // alone (the peer's data, Close and handshake messages); one armed so
    // that now needs every completion is armed again, wider.
    const bool solicited_only = !draining && (signalled & POLLOUT) == 0 && !wants_every_completion();
    if (!ready && (!cq_armed_ || (armed_solicited_only_ && !solicited_only))) {
        if (arm == Arm::kIfIdle) {
            arm_completions(solicited_only);
            // The arm's poll may have taken a message that made a grant due
            // which could not be posted: that waits for every completion.
            if (armed_solicited_only_ && wants_every_completion()) arm_completions(false);
            ready = readiness(mask) != 0;
        } else {
            ready = true;
        }
    }
    // An event left in the channel signals fd() already.
    events_.set_ready(ready && !completion_event_pending_);
}

bool Stream::wants_every_completion() const {
    // Progress that a send completion (room in staging or the send queue)
    // or the peer's CreditUpdate (credits, ring space) would let us make
    // without the caller: held bytes and control messages we could not
    // post yet. A peer that does not mark its messages solicited wakes us
    // with nothing else.
    return phase_ != Phase::Established || (stats_.features & protocol::feature::kSolicitedEvents) == 0 ||
           held_ > 0 || credit_update_pending_ || (close_queued_ && !close_sent_);
}

void Stream::arm_completions(bool solicited_only) {
    if (!link_) return;  // failed over: the verbs resources are gone
    // The event is taken only now, with the arm: until then it kept fd()
    // readable, and a sleep must not find it there.
    if (completion_event_pending_) {
        link_->take_completion_event();
        completion_event_pending_ = false;
    }
    if (!link_->arm(solicited_only)) {
        if (error_ == 0) fail(errno);
        return;
    }
    cq_armed_ = true;
    armed_solicited_only_ = solicited_only;
    poll_completions();  // what arrived before the arm raised no event
    flush_control();
}

bool Stream::drain(Clock::time_point deadline) {
    for (;;) {
        if (drain_done()) return true;
        const auto left = std::chrono::ceil<Millis>(deadline - Clock::now());
        if (left.count() <= 0) return false;
        // Only events wake this sleep: unread input does not (no spinning).
        // drain_done() asks every source itself.
        unsigned woke = 0;
        sleep_for(0, left, woke);
    }
}

}  // namespace pg_rdma::transport
