// Feature negotiation and RX ring exchange (see stream.hpp and protocol/).
//
//   active                          passive
//   GetServerFeature(offer)   ->
//                             <-    SetClientFeature(agreement), RegisterXferMemory
//   RegisterXferMemory        ->
// Each side is established once it holds the peer's ring; the active side
// may start writing right after its RegisterXferMemory, and RC ordering
// makes the ring arrive at the passive side before any data.
#include <algorithm>
#include <string>

#include "protocol/negotiation.hpp"
#include "transport/stream.hpp"

namespace pg_rdma::transport {
namespace {

// How long a refused peer gets to receive our SetClientFeature refusal
// before the queue pair goes away.
constexpr Millis kRefusalLinger{500};
constexpr Millis kMinTick{5};

Millis tick_for(Millis interval) { return std::max(interval / 2, kMinTick); }

}  // namespace

std::unique_ptr<Stream> Stream::start(std::unique_ptr<Link> link, Role role, Error& err) {
    std::unique_ptr<Stream> s(new Stream(std::move(link)));
    if (!s->events_.init(s->link_->completion_fd(), s->link_->event_fd(),
                         tick_for(s->settings_.keepalive_interval), err))
        return nullptr;
    s->phase_ = role == Role::Active ? Phase::AwaitAgreement : Phase::AwaitOffer;
    if (role == Role::Active && !s->send_control(s->local_offer(), false)) {
        fail_errno(err, s->error_ != 0 ? s->error_ : EIO, "posting GetServerFeature");
        return nullptr;
    }
    return s;
}

Stream::SetupStep Stream::handshake_step(Error& err) {
    progress();
    if (phase_ == Phase::Established && error_ == 0) return SetupStep::Done;
    if (refused_ && error_ == 0) {
        // Give the refused peer a moment to receive our refusal before the
        // queue pair goes away; then fail.
        if (!refusal_linger_until_) refusal_linger_until_ = Clock::now() + kRefusalLinger;
        if (!sq_.idle() && Clock::now() < *refusal_linger_until_) return SetupStep::InProgress;
        fail(EPROTO);
    }
    if (error_ == 0) return SetupStep::InProgress;
    transport::fail(err, error_, "RDMA handshake failed: " + failure_reason_);
    return SetupStep::Failed;
}

void Stream::abandon_handshake(const char* why) {
    if (failure_reason_.empty()) failure_reason_ = why;
    fail(ETIMEDOUT);
}

protocol::FeatureOffer Stream::local_offer() const {
    return {protocol::kMinProtocolVersion,
            protocol::kMaxProtocolVersion,
            settings_.credits,
            protocol::kSupportedFeatures,
            settings_.rx_buffer_size,
            static_cast<std::uint32_t>(settings_.keepalive_interval.count()),
            static_cast<std::uint32_t>(settings_.keepalive_timeout.count())};
}

bool Stream::on_offer(const protocol::FeatureOffer& offer) {
    if (phase_ != Phase::AwaitOffer) return protocol_error("GetServerFeature out of turn");
    // The passive side's policy bounds what a client, not yet
    // authenticated, may impose on this process's keepalive.
    const protocol::FeatureAgreement agreed = protocol::negotiate(offer, local_offer(), keepalive_bounds(settings_));
    if (agreed.status != protocol::NegotiationStatus::Ok) {
        failure_reason_ = "refused the client's offer: " + std::string(protocol::to_string(agreed.status));
        refused_ = true;
        send_control(agreed, true);
        return true;
    }
    peer_.reset(offer.rx_buffer_size);
    return send_control(agreed, false) && apply_agreement(agreed, offer.credits);
}

bool Stream::on_agreement(const protocol::FeatureAgreement& agreed) {
    if (phase_ != Phase::AwaitAgreement) return protocol_error("SetClientFeature out of turn");
    const std::string_view why = protocol::check_agreement(local_offer(), agreed);
    if (!why.empty()) {
        failure_reason_ = "the server's answer is unusable: " + std::string(why);
        fail(EPROTO);
        return false;
    }
    peer_.reset(agreed.rx_buffer_size);
    return apply_agreement(agreed, agreed.credits);
}

bool Stream::apply_agreement(const protocol::FeatureAgreement& agreed, std::uint16_t peer_credits) {
    version_ = agreed.version;
    peer_credits_ = peer_credits;
    if (!send_credits_.on_grant(peer_credits, protocol::kMaxCredits))
        return protocol_error("the peer announced an impossible credit count");
    const Millis interval{agreed.keepalive_interval_ms};
    keepalive_.set(interval, Millis{agreed.keepalive_timeout_ms});
    stats_.protocol_version = agreed.version;
    stats_.features = agreed.features;
    ring_wraps_ = (agreed.features & protocol::feature::kRingWrap) != 0;
    stats_.keepalive_interval_ms = agreed.keepalive_interval_ms;
    stats_.keepalive_timeout_ms = agreed.keepalive_timeout_ms;
    // Without the keepalive feature the values mean nothing: no probes, no
    // verdict, and no timer waking the process.
    events_.set_tick(keepalive_agreed() ? tick_for(interval) : Millis{0});
    stats_.peer_rx_buffer_size = peer_.size();
    phase_ = Phase::AwaitRing;
    return send_control(link_->rx_ring_announcement(), false);
}

bool Stream::on_peer_ring(const protocol::XferMemory& ring) {
    if (phase_ != Phase::AwaitRing) return protocol_error("RegisterXferMemory out of turn");
    if (ring.length != peer_.size())
        return protocol_error("RegisterXferMemory length differs from the announced RX buffer size");
    peer_ring_addr_ = ring.addr;
    peer_ring_rkey_ = ring.rkey;
    phase_ = Phase::Established;
    return true;
}

}  // namespace pg_rdma::transport
