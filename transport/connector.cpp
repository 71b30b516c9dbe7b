// The active setup as steps (see connector.hpp).
#include "transport/connector.hpp"

#include <algorithm>
#include <cerrno>
#include <string>

#include <fmt/format.h>

#include "transport/cm_events.hpp"
#include "transport/endpoint.hpp"
#include "transport/handshake_stage.hpp"

namespace pg_rdma::transport {

// Members in creation order, so they are released in reverse: the stream
// (and its endpoint) first, the rdma_cm id before its event channel.
class Connector::State {
public:
    State(const protocol::Nonce& n, const Settings& s, std::string w) : nonce(n), settings(s), where(std::move(w)) {}

    protocol::Nonce nonce;
    Settings settings;
    std::string where;  // the destination, for messages
    CmChannelPtr channel;  // until the endpoint takes them over
    CmIdPtr id;
    std::unique_ptr<Endpoint> endpoint;  // Connecting
    HandshakeStage handshake;            // Handshaking and Done

    // The event that ends `stage`, and what to call a failure to get it.
    [[nodiscard]] rdma_cm_event_type awaited(Stage stage) const;
    [[nodiscard]] std::string doing(Stage stage) const;
    [[nodiscard]] rdma_event_channel* events() const {
        return endpoint ? endpoint->cm_channel() : channel.get();
    }
};

rdma_cm_event_type Connector::State::awaited(Stage stage) const {
    switch (stage) {
        case Stage::ResolvingAddress: return RDMA_CM_EVENT_ADDR_RESOLVED;
        case Stage::ResolvingRoute: return RDMA_CM_EVENT_ROUTE_RESOLVED;
        default:
            // rdma_cm brings up only a QP it made itself on InfiniBand and
            // RoCE (endpoint.hpp); on iWARP the kernel does it either way.
            return endpoint && endpoint->brings_up_own_queue_pair() ? RDMA_CM_EVENT_CONNECT_RESPONSE
                                                                    : RDMA_CM_EVENT_ESTABLISHED;
    }
}

namespace {

// IBTA CM REJ reasons, which rdma_cm hands the active side as a REJECTED
// event's status on InfiniBand and RoCE (iWARP hands negative errnos).
constexpr int kRejectNoListener = 8;   // IB_CM_REJ_INVALID_SERVICE_ID: nothing listens on that port
constexpr int kRejectByConsumer = 28;  // IB_CM_REJ_CONSUMER_DEFINED: rdma_reject, or an id destroyed unaccepted

// What a rejection of our connection request means to the user who has to
// act on it. A server that stops waiting destroys its listener; a request
// that came just before then is closed unaccepted (28), one that came
// after finds no listener (8).
std::string why_rejected(int status) {
    constexpr const char* kStoppedWaiting =
        "the server stopped waiting for this connection, whose setup took longer than the server's "
        "connect_timeout (pg_rdma.connect_timeout on a PostgreSQL server; its log says so)";
    switch (status) {
        case kRejectNoListener:
            return fmt::format("nothing listens on that port any more: {}, or the port is not the one the server "
                               "sent",
                               kStoppedWaiting);
        case kRejectByConsumer:
            return fmt::format("the server's listener closed the request unaccepted: it refused it (a wrong "
                               "nonce, or a request from another address than the TCP connection's), or {}",
                               kStoppedWaiting);
        default:
            return fmt::format("the server did not accept: a wrong nonce or address, or {}", kStoppedWaiting);
    }
}

}  // namespace

std::string Connector::State::doing(Stage stage) const {
    switch (stage) {
        case Stage::ResolvingAddress: return fmt::format("rdma_resolve_addr({}): no RDMA device routes to it", where);
        case Stage::ResolvingRoute: return fmt::format("rdma_resolve_route({})", where);
        default: return fmt::format("rdma_connect({})", where);
    }
}

Connector::Connector(std::unique_ptr<State> state, Deadline deadline) noexcept
    : state_(std::move(state)), deadline_(deadline) {}

Connector::~Connector() = default;

std::unique_ptr<Connector> Connector::start(const sockaddr* dst, const sockaddr* src, const protocol::Nonce& nonce,
                                            const Settings& settings, Deadline deadline, Error& err) noexcept {
    try {
        auto state = std::make_unique<State>(nonce, settings, format_address(dst));
        state->channel = make_cm_channel(SetupSide::Connecting, err);
        if (!state->channel) return nullptr;
        rdma_cm_id* raw = nullptr;
        if (rdma_create_id(state->channel.get(), &raw, nullptr, RDMA_PS_TCP) != 0) {
            fail_errno(err, errno, "rdma_create_id");
            return nullptr;
        }
        state->id.reset(raw);
        const int timeout_ms = ms_until(deadline);
        if (timeout_ms == 0) {
            fail(err, ETIMEDOUT, fmt::format("rdma_resolve_addr({}): the setup's deadline has already passed",
                                             state->where));
            return nullptr;
        }
        if (rdma_resolve_addr(state->id.get(), const_cast<sockaddr*>(src), const_cast<sockaddr*>(dst),
                              timeout_ms) != 0) {
            const int code = errno;
            fail_errno(err, code,
                       src != nullptr ? fmt::format("rdma_resolve_addr({} from {})", state->where, format_address(src))
                                      : fmt::format("rdma_resolve_addr({})", state->where));
            return nullptr;
        }
        return std::unique_ptr<Connector>(new Connector(std::move(state), deadline));
    } catch (...) {
        fail_from_exception(err, "Connector::start");
        return nullptr;
    }
}

StepStatus Connector::step(Error& err) noexcept {
    try {
        return advance(err);
    } catch (...) {
        fail_from_exception(err, "Connector::step");
        return fail_step(err);
    }
}

StepStatus Connector::advance(Error& err) {
    for (;;) {
        StepStatus status = StepStatus::InProgress;
        const Stage before = stage_;
        switch (stage_) {
            case Stage::Done: return StepStatus::Done;
            case Stage::Failed: err = failure_; return StepStatus::Failed;
            case Stage::ResolvingAddress:
            case Stage::ResolvingRoute:
            case Stage::Connecting: status = await_cm_event(err); break;
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

StepStatus Connector::await_cm_event(Error& err) {
    State& s = *state_;
    const rdma_cm_event_type awaited = s.awaited(stage_);
    {
        // Acknowledged at the end of this block, before anything can
        // destroy its id (rdma_destroy_id waits for every acknowledgement).
        CmEventPtr event;
        if (!take_cm_event(s.events(), event, err)) return StepStatus::Failed;
        if (!event) {
            if (!passed(deadline_)) return StepStatus::InProgress;
            cm_timeout(awaited, s.doing(stage_), err);
            return StepStatus::Failed;
        }
        if (event->event != awaited) {
            unexpected_cm_event(*event, awaited, s.doing(stage_), err);
            if (event->event == RDMA_CM_EVENT_REJECTED) err.message += ": " + why_rejected(event->status);
            return StepStatus::Failed;
        }
    }
    switch (stage_) {
        case Stage::ResolvingAddress:
            if (rdma_resolve_route(s.id.get(), std::max(ms_until(deadline_), 1)) != 0) {
                fail_errno(err, errno, fmt::format("rdma_resolve_route({})", s.where));
                return StepStatus::Failed;
            }
            stage_ = Stage::ResolvingRoute;
            break;
        case Stage::ResolvingRoute: {
            s.endpoint = Endpoint::create(std::move(s.channel), std::move(s.id), s.settings, err);
            if (!s.endpoint) return StepStatus::Failed;
            const auto private_data = protocol::encode_connect_private_data(s.nonce);
            rdma_conn_param param = connection_parameters();
            param.private_data = private_data.data();
            param.private_data_len = static_cast<std::uint8_t>(private_data.size());
            param.qp_num = s.endpoint->queue_pair_number();  // read only for a QP rdma_cm does not know
            if (rdma_connect(s.endpoint->id(), &param) != 0) {
                fail_errno(err, errno, fmt::format("rdma_connect({})", s.where));
                return StepStatus::Failed;
            }
            stage_ = Stage::Connecting;
            break;
        }
        default:
            if (!s.endpoint->establish(err)) return StepStatus::Failed;
            if (!s.handshake.start(std::move(s.endpoint), Role::Active, err)) return StepStatus::Failed;
            stage_ = Stage::Handshaking;
            break;
    }
    return StepStatus::InProgress;
}

StepStatus Connector::fail_step(Error& err) noexcept {
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

Want Connector::want() const noexcept {
    switch (stage_) {
        case Stage::ResolvingAddress:
        case Stage::ResolvingRoute:
        case Stage::Connecting: return Want::one(state_->events()->fd, POLLIN);
        case Stage::Handshaking: return Want::one(state_->handshake.fd(), POLLIN);
        case Stage::Done:
        case Stage::Failed: break;
    }
    return Want::none();
}

std::unique_ptr<Connection> Connector::take_connection() noexcept {
    if (stage_ != Stage::Done || !state_) return nullptr;
    auto conn = state_->handshake.take_connection();
    state_.reset();
    return conn;
}

const char* to_string(Connector::Stage stage) noexcept {
    switch (stage) {
        case Connector::Stage::ResolvingAddress: return "resolving the address";
        case Connector::Stage::ResolvingRoute: return "resolving the route";
        case Connector::Stage::Connecting: return "connecting";
        case Connector::Stage::Handshaking: return "handshaking";
        case Connector::Stage::Done: return "done";
        case Connector::Stage::Failed: return "failed";
    }
    return "?";
}

}  // namespace pg_rdma::transport
