// The passive setup as steps (see acceptor.hpp).
#include "transport/acceptor.hpp"

#include <openssl/crypto.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "transport/cm_events.hpp"
#include "transport/endpoint.hpp"
#include "transport/handshake_stage.hpp"
#include "transport/rdma_setup.hpp"

namespace pg_rdma::transport {
namespace {

// Why a connection request must be refused, or empty if it is the one awaited.
std::string judge_request(const rdma_cm_event& event, const protocol::Nonce& nonce,
                          const std::optional<sockaddr_storage>& expected_peer) {
    const auto decoded = protocol::decode_connect_private_data(
        {static_cast<const std::uint8_t*>(event.param.conn.private_data), event.param.conn.private_data_len});
    if (!decoded.is_ok()) return fmt::format("malformed private data ({})", decoded.error);
    if (CRYPTO_memcmp(decoded.value.data(), nonce.data(), nonce.size()) != 0) return "wrong nonce";
    const sockaddr* from = rdma_get_peer_addr(event.id);
    if (!expected_peer) return {};
    const auto* expected = reinterpret_cast<const sockaddr*>(&*expected_peer);
    if (!same_ip(from, expected))
        return fmt::format("came from {} but {} was expected", format_address(from), format_address(expected));
    return {};
}

}  // namespace

// Members in creation order, so they are released in reverse: the stream
// (and its endpoint) first. The listener is borrowed.
class Acceptor::State {
public:
    State(Listener& l, const protocol::Nonce& n) : listener(l), nonce(n) {}

    Listener& listener;
    protocol::Nonce nonce;
    std::optional<sockaddr_storage> expected_peer;
    std::string last_refusal;            // for the timeout message
    std::unique_ptr<Endpoint> endpoint;  // Accepting
    HandshakeStage handshake;            // Handshaking and Done
};

Acceptor::Acceptor(std::unique_ptr<State> state, Deadline deadline) noexcept
    : state_(std::move(state)), deadline_(deadline) {}

Acceptor::~Acceptor() = default;

std::unique_ptr<Acceptor> Acceptor::start(Listener& listener, const protocol::Nonce& nonce,
                                          const sockaddr* expected_peer, Deadline deadline, Error& err) noexcept {
    try {
        auto state = std::make_unique<State>(listener, nonce);
        if (expected_peer != nullptr) {
            sockaddr_storage peer{};
            std::memcpy(&peer, expected_peer,
                        expected_peer->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
            state->expected_peer = peer;
        }
        return std::unique_ptr<Acceptor>(new Acceptor(std::move(state), deadline));
    } catch (...) {
        fail_from_exception(err, "Acceptor::start");
        return nullptr;
    }
}

StepStatus Acceptor::step(Error& err) noexcept {
    try {
        return advance(err);
    } catch (...) {
        fail_from_exception(err, "Acceptor::step");
        return fail_step(err);
    }
}

StepStatus Acceptor::advance(Error& err) {
    for (;;) {
        StepStatus status = StepStatus::InProgress;
        const Stage before = stage_;
        switch (stage_) {
            case Stage::Done: return StepStatus::Done;
            case Stage::Failed: err = failure_; return StepStatus::Failed;
            case Stage::AwaitingRequest: status = await_request(err); break;
            case Stage::Accepting: status = await_established(err); break;
            case Stage::Handshaking:
                status = state_->handshake.step(deadline_, err);
                if (status == StepStatus::Done) stage_ = Stage::Done;
                break;
        }
        if (status == StepStatus::Failed) return fail_step(err);
        if (status == StepStatus::Done || stage_ == before) return status;
        // Moved on: what the next stage waits for may be there already.
    }
}

StepStatus Acceptor::await_request(Error& err) {
    State& s = *state_;
    for (;;) {
        CmIdPtr child;  // declared before the event: the event is acknowledged first
        CmEventPtr event;
        if (!take_cm_event(s.listener.cm_channel(), event, err)) return StepStatus::Failed;
        if (!event) {
            if (!passed(deadline_)) return StepStatus::InProgress;
            fail(err, ETIMEDOUT, "timed out waiting for an RDMA connection request");
            if (!s.last_refusal.empty()) err.message += "; refused a request: " + s.last_refusal;
            return StepStatus::Failed;
        }
        if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) continue;
        child.reset(event->id);
        std::string refusal = judge_request(*event, s.nonce, s.expected_peer);
        event.reset();  // acknowledged: rdma_migrate_id waits for that
        if (!refusal.empty()) {
            rdma_reject(child.get(), nullptr, 0);
            s.last_refusal = std::move(refusal);
            continue;
        }
        CmChannelPtr channel = make_cm_channel(SetupSide::Listening, err);
        if (!channel) return StepStatus::Failed;
        // The accepted id leaves the listener's channel: its events are
        // this connection's alone from now on.
        if (rdma_migrate_id(child.get(), channel.get()) != 0) {
            fail_errno(err, errno, "rdma_migrate_id");
            return StepStatus::Failed;
        }
        s.endpoint = Endpoint::create(std::move(channel), std::move(child), s.listener.settings(), err);
        if (!s.endpoint) return StepStatus::Failed;
        rdma_conn_param param = connection_parameters();
        if (rdma_accept(s.endpoint->id(), &param) != 0) {
            fail_errno(err, errno, "rdma_accept");
            return StepStatus::Failed;
        }
        stage_ = Stage::Accepting;
        return StepStatus::InProgress;
    }
}

StepStatus Acceptor::await_established(Error& err) {
    State& s = *state_;
    {
        // Acknowledged at the end of this block, before anything can
        // destroy its id (rdma_destroy_id waits for every acknowledgement).
        CmEventPtr event;
        if (!take_cm_event(s.endpoint->cm_channel(), event, err)) return StepStatus::Failed;
        if (!event) {
            if (!passed(deadline_)) return StepStatus::InProgress;
            cm_timeout(RDMA_CM_EVENT_ESTABLISHED, "rdma_accept", err);
            return StepStatus::Failed;
        }
        if (event->event != RDMA_CM_EVENT_ESTABLISHED) {
            unexpected_cm_event(*event, RDMA_CM_EVENT_ESTABLISHED, "rdma_accept", err);
            return StepStatus::Failed;
        }
    }
    if (!s.handshake.start(std::move(s.endpoint), Role::Passive, err)) return StepStatus::Failed;
    stage_ = Stage::Handshaking;
    return StepStatus::InProgress;
}

StepStatus Acceptor::fail_step(Error& err) noexcept {
    state_.reset();
    stage_ = Stage::Failed;
    failure_.code = err.code;
    try {
        failure_.message = err.message;
    } catch (...) {
        failure_.message.clear();
    }
    return StepStatus::Failed;
}

Deadline Acceptor::deadline() const noexcept {
    return stage_ == Stage::Handshaking ? state_->handshake.deadline_for(deadline_) : deadline_;
}

Want Acceptor::want() const noexcept {
    switch (stage_) {
        case Stage::AwaitingRequest: return Want::one(state_->listener.fd(), POLLIN);
        case Stage::Accepting: return Want::one(state_->endpoint->cm_channel()->fd, POLLIN);
        case Stage::Handshaking: return Want::one(state_->handshake.fd(), POLLIN);
        case Stage::Done:
        case Stage::Failed: break;
    }
    return Want::none();
}

std::unique_ptr<Connection> Acceptor::take_connection() noexcept {
    if (stage_ != Stage::Done || !state_) return nullptr;
    auto conn = state_->handshake.take_connection();
    state_.reset();
    return conn;
}

const char* to_string(Acceptor::Stage stage) noexcept {
    switch (stage) {
        case Acceptor::Stage::AwaitingRequest: return "awaiting the connection request";
        case Acceptor::Stage::Accepting: return "accepting";
        case Acceptor::Stage::Handshaking: return "handshaking";
        case Acceptor::Stage::Done: return "done";
        case Acceptor::Stage::Failed: return "failed";
    }
    return "?";
}

}  // namespace pg_rdma::transport
