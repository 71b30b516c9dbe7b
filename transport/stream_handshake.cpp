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

Millis until(Stream::Clock::time_point deadline) {
    return std::chrono::duration_cast<Millis>(deadline - Stream::Clock::now());
}

}  // namespace

std::unique_ptr<Stream> Stream::establish(std::unique_ptr<Endpoint> endpoint, Role role,
                                          Clock::time_point deadline, Error& err) {
    std::unique_ptr<Stream> s(new Stream(std::move(endpoint)));
    if (!s->events_.init(s->endpoint_->completion_fd(), s->endpoint_->cm_channel()->fd,
                         tick_for(s->settings_.keepalive_interval), err))
        return nullptr;
    if (!s->run_handshake(role, deadline, err)) return nullptr;
    return s;
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

bool Stream::run_handshake(Role role, Clock::time_point deadline, Error& err) {
    phase_ = role == Role::Active ? Phase::AwaitAgreement : Phase::AwaitOffer;
    if (role == Role::Active && !send_control(local_offer(), false))
        return fail_errno(err, error_ != 0 ? error_ : EIO, "posting GetServerFeature");
    while (progress() && phase_ != Phase::Established && !refused_) {
        const Millis left = until(deadline);
        if (left.count() <= 0) {
            failure_reason_ = "timed out waiting for the peer's handshake messages";
            fail(ETIMEDOUT);
            break;
        }
        events_.wait(left);
    }
    if (phase_ == Phase::Established && error_ == 0) return true;
    if (refused_) {
        const auto linger = std::min(deadline, Clock::now() + kRefusalLinger);
        while (!sq_.idle() && progress() && Clock::now() < linger) events_.wait(until(linger));
        fail(EPROTO);
    }
    return transport::fail(err, error_, "RDMA handshake failed: " + failure_reason_);
}

bool Stream::on_offer(const protocol::FeatureOffer& offer) {
    if (phase_ != Phase::AwaitOffer) return protocol_error("GetServerFeature out of turn");
    const protocol::FeatureAgreement agreed = protocol::negotiate(offer, local_offer());
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
    if (!send_credits_.on_grant(peer_credits, protocol::kMaxCredits))
        return protocol_error("the peer announced an impossible credit count");
    const Millis interval{agreed.keepalive_interval_ms};
    keepalive_.set(interval, Millis{agreed.keepalive_timeout_ms});
    events_.set_tick(tick_for(interval));
    stats_.protocol_version = agreed.version;
    stats_.features = agreed.features;
    stats_.peer_rx_buffer_size = peer_.size();
    phase_ = Phase::AwaitRing;
    return send_control(endpoint_->rx_ring_announcement(), false);
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
