// The client's side of the upgrade as steps (see tcp_upgrade.hpp):
// request, reply, then an RDMA Connector from the TCP connection's local
// address to the endpoint the reply names.
#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "transport/cm_events.hpp"
#include "transport/connector.hpp"
#include "transport/rdma_setup.hpp"
#include "transport/tcp_upgrade.hpp"
#include "transport/upgrade_io.hpp"

namespace pg_rdma::transport {

ClientUpgrade::ClientUpgrade(int tcp_fd, Mode mode, const Settings& settings, const TcpIo& io) noexcept
    : ClientUpgrade(tcp_fd, mode, settings, io, Limits{SetupClock::now() + settings.connect_timeout}) {}

ClientUpgrade::ClientUpgrade(int tcp_fd, Mode mode, const Settings& settings, const TcpIo& io, Limits limits,
                             Request request) noexcept
    : fd_(tcp_fd),
      mode_(mode),
      request_kind_(request),
      settings_(settings),
      io_(io),
      deadline_(limits.reply),
      rdma_latest_(limits.rdma_latest) {}

ClientUpgrade::~ClientUpgrade() = default;

StepStatus ClientUpgrade::step() noexcept {
    try {
        return advance();
    } catch (...) {
        Error err;
        fail_from_exception(err, "ClientUpgrade::step");
        connector_.reset();
        return finish(UpgradeOutcome::Failed, std::move(err));
    }
}

StepStatus ClientUpgrade::advance() {
    if (stage_ == Stage::Done) return StepStatus::Done;
    if (!started_) {
        started_ = true;
        Error err;
        // Nothing is sent yet: the session simply stays on TCP.
        if (!rdma_usable(settings_, SetupSide::Connecting, err) || !tcp_addresses(fd_, local_, peer_, err))
            return fall_back(UpgradeOutcome::TcpSame, std::move(err));
        request_ = request_kind_ == Request::Probe ? protocol::encode_probe_request()
                                                   : protocol::encode_upgrade_request();
    }
    switch (stage_) {
        case Stage::SendingRequest: return send_request();
        case Stage::AwaitingReply: return receive_reply();
        case Stage::Connecting: return connect_rdma();
        case Stage::Done: break;
    }
    return StepStatus::Done;
}

namespace {

// What an unfinished exchange on the TCP connection means at `deadline`.
bool tcp_timed_out(Deadline deadline, Error& err) {
    if (!passed(deadline)) return false;
    fail(err, ETIMEDOUT,
         "the server did not answer the RDMA upgrade request in time (a busy server: its backends start "
         "slowly)");
    return true;
}

// rdma_connect's request or the server's answer to it lost on the way,
// while TCP to the same address works: almost always a firewall.
constexpr const char* kSilentPeerHint =
    "; nothing came back from the server's RDMA port: check that RoCE v2 (UDP port 4791) is not blocked by a "
    "firewall on either host or between them (or the server was too busy to answer in time)";

}  // namespace

StepStatus ClientUpgrade::send_request() {
    Error err;
    switch (send_some(fd_, io_, request_, request_sent_, err)) {
        case IoStatus::Done: stage_ = Stage::AwaitingReply; return receive_reply();
        case IoStatus::Wait:
            if (!tcp_timed_out(deadline_, err)) return StepStatus::InProgress;
            // The request may still be read later: only a fresh connection
            // is sure to carry nothing of this exchange.
            return fall_back(UpgradeOutcome::TcpReconnect, std::move(err));
        case IoStatus::Failed: break;
    }
    // A server that closes on our request without a word is not ours.
    if (err.code == ECONNRESET) return fall_back(UpgradeOutcome::TcpReconnect, std::move(err));
    return finish(UpgradeOutcome::Failed, std::move(err));
}

StepStatus ClientUpgrade::receive_reply() {
    Error err;
    if (reply_received_ > 0 && reply_[0] == protocol::kReplyProbeDecline) return receive_probe_decline();
    if (reply_received_ == 0) {
        // The tag alone first: after 'N' or 'E' the bytes that follow are
        // not part of our exchange.
        switch (recv_some(fd_, io_, std::span(reply_).first(1), reply_received_, err)) {
            case IoStatus::Done: break;
            case IoStatus::Wait:
                if (!tcp_timed_out(deadline_, err)) return StepStatus::InProgress;
                return fall_back(UpgradeOutcome::TcpReconnect, std::move(err));
            case IoStatus::Failed:
                if (err.code == ECONNRESET) return fall_back(UpgradeOutcome::TcpReconnect, std::move(err));
                return finish(UpgradeOutcome::Failed, std::move(err));
        }
        switch (reply_[0]) {
            case protocol::kReplyAccept: break;
            case protocol::kReplyDecline:
                fail(err, ECONNREFUSED,
                     "the server declined RDMA for this session (its log says why: no RDMA device on that address, "
                     "its memlock limit, its caps on sessions not yet authenticated, "
                     "pg_rdma.max_unauthenticated_sessions and _memory, or a pg_hba.conf that rejects this "
                     "client's address)");
                return fall_back(UpgradeOutcome::TcpSame, std::move(err));
            case protocol::kReplyError:
                fail(err, EPROTONOSUPPORT,
                     request_kind_ == Request::Probe
                         ? "the server does not answer RDMA probes: pg_rdma is not in its "
                           "shared_preload_libraries (or pg_rdma.listen_addresses is empty), or its pg_rdma "
                           "is older than the one of extension 0.3"
                         : "the server does not support RDMA sessions (is pg_rdma in its shared_preload_libraries "
                           "and pg_rdma.listen_addresses set?)");
                return fall_back(UpgradeOutcome::TcpReconnect, std::move(err));
            case protocol::kReplyProbeDecline:
                if (request_kind_ == Request::Probe) return receive_probe_decline();
                [[fallthrough]];  // not an answer to a session's request
            default:
                fail(err, EPROTO, fmt::format("unexpected reply 0x{:02x} to the RDMA upgrade request", reply_[0]));
                return fall_back(UpgradeOutcome::TcpReconnect, std::move(err));
        }
    }
    switch (recv_some(fd_, io_, reply_, reply_received_, err)) {
        case IoStatus::Done: return on_reply();
        case IoStatus::Wait:
            if (!tcp_timed_out(deadline_, err)) return StepStatus::InProgress;
            return fall_back(UpgradeOutcome::TcpReconnect, std::move(err));
        case IoStatus::Failed: break;
    }
    return finish(UpgradeOutcome::Failed, std::move(err));
}

// A probe's 'D': the tag is in reply_[0], the rest follows; the reply
// says how long it is once its header is in.
StepStatus ClientUpgrade::receive_probe_decline() {
    Error err;
    if (probe_decline_.empty()) {
        probe_decline_.assign(protocol::kProbeDeclineHeaderSize, 0);
        probe_decline_[0] = reply_[0];
        probe_decline_received_ = 1;
    }
    for (;;) {
        switch (recv_some(fd_, io_, probe_decline_, probe_decline_received_, err)) {
            case IoStatus::Done: break;
            case IoStatus::Wait:
                if (!tcp_timed_out(deadline_, err)) return StepStatus::InProgress;
                return finish(UpgradeOutcome::Failed, std::move(err));
            case IoStatus::Failed: return finish(UpgradeOutcome::Failed, std::move(err));
        }
        const auto decoded = protocol::decode_probe_decline(probe_decline_);
        if (decoded.status == protocol::DecodeStatus::NeedMore) {
            // The header is in and its lengths are in range: read the rest.
            const std::size_t whole = protocol::kProbeDeclineHeaderSize + probe_decline_[1] +
                                      ((std::size_t{probe_decline_[2]} << 8) | probe_decline_[3]);
            if (whole <= probe_decline_.size()) break;
            probe_decline_.resize(whole);
            continue;
        }
        if (!decoded.is_ok()) break;
        result_.probe_decline = decoded.value;
        fail(err, ECONNREFUSED,
             fmt::format("the server declined RDMA ({}): {}", decoded.value.outcome, decoded.value.reason));
        return finish(UpgradeOutcome::Failed, std::move(err));
    }
    fail(err, EPROTO, "malformed probe reply from the server");
    return finish(UpgradeOutcome::Failed, std::move(err));
}

StepStatus ClientUpgrade::on_reply() {
    Error err;
    const auto reply = protocol::decode_upgrade_reply(reply_);
    if (!reply.is_ok() || reply.value.kind != protocol::ReplyKind::Accept) {
        fail(err, EPROTO, fmt::format("malformed RDMA upgrade reply from the server: {}", reply.error));
        return fall_back(UpgradeOutcome::TcpReconnect, std::move(err));
    }
    // From here on a failure leaves the server waiting for RDMA or for our
    // next TCP bytes: continuing on TCP is always possible (TcpSame).
    const sockaddr_storage dst = endpoint_address(reply.value.endpoint);
    if (!settings_.allow_redirect && !same_ip(as_sockaddr(dst), as_sockaddr(peer_))) {
        fail(err, EPERM,
             fmt::format("refused the server's RDMA endpoint {}: it is not the address of the TCP peer {} "
                         "(allow_redirect permits that, for a server behind a TCP proxy)",
                         format_address(as_sockaddr(dst)), format_address(as_sockaddr(peer_))));
        return fall_back(UpgradeOutcome::TcpSame, std::move(err));
    }
    // The RDMA setup's own budget starts now (waiting for the reply was
    // TCP's time, which a TCP session would have spent as well), and ends
    // no later than the server's: both then fall back together.
    Millis budget = settings_.connect_timeout;
    if (reply.value.endpoint.setup_budget != 0)
        budget = std::min(budget, Millis{protocol::setup_budget_ms(reply.value.endpoint.setup_budget)});
    deadline_ = std::min(SetupClock::now() + budget, rdma_latest_);
    // A redirect to another address family cannot use our TCP source.
    const sockaddr* src = dst.ss_family == local_.ss_family ? as_sockaddr(local_) : nullptr;
    connector_ = Connector::start(as_sockaddr(dst), src, reply.value.endpoint.nonce, settings_, deadline_, err);
    if (!connector_) return fall_back(UpgradeOutcome::TcpSame, std::move(err));
    stage_ = Stage::Connecting;
    return connect_rdma();
}

StepStatus ClientUpgrade::connect_rdma() {
    Error err;
    const Connector::Stage before = connector_->stage();
    switch (connector_->step(err)) {
        case StepStatus::InProgress: return StepStatus::InProgress;
        case StepStatus::Done:
            result_.connection = connector_->take_connection();
            connector_.reset();
            (void)result_.connection->attach_tcp(fd_);  // failover's path; without it the session just has none
            return finish(UpgradeOutcome::Rdma, {});
        case StepStatus::Failed: break;
    }
    connector_.reset();
    if (err.code == ETIMEDOUT && before == Connector::Stage::Connecting) err.message += kSilentPeerHint;
    // The server sees our next TCP bytes, or the queue pair let go, and
    // gives up too.
    return fall_back(UpgradeOutcome::TcpSame, std::move(err));
}

StepStatus ClientUpgrade::finish(UpgradeOutcome outcome, Error why) noexcept {
    stage_ = Stage::Done;
    result_.outcome = outcome;
    result_.error = std::move(why);
    return StepStatus::Done;
}

StepStatus ClientUpgrade::fall_back(UpgradeOutcome prefer_outcome, Error why) noexcept {
    return finish(mode_ == Mode::Prefer ? prefer_outcome : UpgradeOutcome::Failed, std::move(why));
}

Want ClientUpgrade::want() const noexcept {
    switch (stage_) {
        case Stage::SendingRequest: return Want::one(fd_, POLLOUT);
        case Stage::AwaitingReply: return Want::one(fd_, POLLIN);
        case Stage::Connecting: return connector_->want();
        case Stage::Done: break;
    }
    return Want::none();
}

UpgradeResult upgrade_client(int tcp_fd, Mode mode, const Settings& settings, const TcpIo& io) noexcept {
    ClientUpgrade upgrade(tcp_fd, mode, settings, io);
    return run_to_end(upgrade);
}

const char* to_string(ClientUpgrade::Stage stage) noexcept {
    switch (stage) {
        case ClientUpgrade::Stage::SendingRequest: return "sending the request";
        case ClientUpgrade::Stage::AwaitingReply: return "awaiting the reply";
        case ClientUpgrade::Stage::Connecting: return "connecting over RDMA";
        case ClientUpgrade::Stage::Done: return "done";
    }
    return "?";
}

}  // namespace pg_rdma::transport
