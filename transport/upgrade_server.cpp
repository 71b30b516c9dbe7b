// The server's side of the upgrade as steps (see tcp_upgrade.hpp): a
// listener on the TCP connection's local address, the 'R' reply (or 'N'),
// then an Acceptor, while the TCP socket tells whether the client gave up.
#include <poll.h>

#include <algorithm>
#include <cerrno>

#include "transport/acceptor.hpp"
#include "transport/rdma_setup.hpp"
#include "transport/tcp_upgrade.hpp"
#include "transport/upgrade_io.hpp"

namespace pg_rdma::transport {

ServerUpgrade::ServerUpgrade(int tcp_fd, const Settings& settings, const TcpIo& io, Decline decline) noexcept
    : fd_(tcp_fd),
      settings_(settings),
      io_(io),
      decline_(decline),
      deadline_(SetupClock::now() + settings.connect_timeout) {}

ServerUpgrade::~ServerUpgrade() = default;

StepStatus ServerUpgrade::step() noexcept {
    try {
        return advance();
    } catch (...) {
        Error err;
        fail_from_exception(err, "ServerUpgrade::step");
        // Once 'R' is out the client can always continue on TCP; before,
        // the exchange is in an unknown state.
        const bool replied = stage_ == Stage::AwaitingClient || stage_ == Stage::Confirming;
        return finish(replied ? UpgradeOutcome::TcpSame : UpgradeOutcome::Failed, std::move(err));
    }
}

StepStatus ServerUpgrade::advance() {
    if (stage_ == Stage::Done) return StepStatus::Done;
    if (!started_) {
        started_ = true;
        prepare_reply();
        if (reply_[0] == protocol::kReplyDecline && decline_ == Decline::ByCaller) {
            result_.decline_unsent = true;
            return finish(UpgradeOutcome::TcpSame, std::move(decline_reason_));
        }
    }
    switch (stage_) {
        case Stage::Replying: return send_reply();
        case Stage::AwaitingClient: return await_client();
        case Stage::Confirming: return confirm();
        case Stage::Done: break;
    }
    return StepStatus::Done;
}

void ServerUpgrade::prepare_reply() {
    Error err;
    protocol::Nonce nonce{};
    if (open_endpoint(nonce, err)) {
        protocol::RdmaEndpoint endpoint = describe_endpoint(listener_->local_address(), nonce);
        // At least 1 ms: 0 would say "not said", letting the client wait its own.
        endpoint.setup_budget =
            protocol::encode_setup_budget(static_cast<std::uint64_t>(std::max(ms_until(deadline_), 1)));
        reply_ = protocol::encode_upgrade_accept(endpoint);
        reply_size_ = reply_.size();
        return;
    }
    acceptor_.reset();
    listener_.reset();
    reply_[0] = protocol::kReplyDecline;
    reply_size_ = 1;
    decline_reason_ = std::move(err);
}

bool ServerUpgrade::open_endpoint(protocol::Nonce& nonce, Error& err) {
    // The endpoint listens on the TCP connection's local address, so the
    // client reaches it the way it reached us; it must come from the peer.
    sockaddr_storage local{}, peer{};
    if (!tcp_addresses(fd_, local, peer, err) || !rdma_usable(settings_, SetupSide::Listening, err)) return false;
    listener_ = Listener::create(as_sockaddr(local), settings_, err);
    if (!listener_) return false;
    if (!protocol::generate_nonce(nonce)) return fail(err, EIO, "RAND_bytes failed to produce a nonce");
    acceptor_ = Acceptor::start(*listener_, nonce, as_sockaddr(peer), deadline_, err);
    return acceptor_ != nullptr;
}

StepStatus ServerUpgrade::send_reply() {
    Error err;
    switch (send_some(fd_, io_, std::span(reply_).first(reply_size_), reply_sent_, err)) {
        case IoStatus::Done:
            if (reply_[0] == protocol::kReplyDecline)
                return finish(UpgradeOutcome::TcpSame, std::move(decline_reason_));
            stage_ = Stage::AwaitingClient;
            return await_client();
        case IoStatus::Wait:
            if (!passed(deadline_)) return StepStatus::InProgress;
            fail(err, ETIMEDOUT, "timed out on the TCP connection during the RDMA upgrade");
            break;
        case IoStatus::Failed: break;
    }
    return finish(UpgradeOutcome::Failed, std::move(err));
}

namespace {

// Bytes (or EOF) on the TCP socket while we wait for RDMA mean the client
// gave up on it. Looked at, never read: they are the session's.
bool tcp_readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, 0) > 0 && p.revents != 0;
}

}  // namespace

StepStatus ServerUpgrade::await_client() {
    Error err;
    switch (acceptor_->step(err)) {
        case StepStatus::Done:
            confirming_ = acceptor_->take_connection();
            acceptor_.reset();
            // The accepted id left the listener's channel: nothing more is
            // to come from the listener, which would queue requests unseen.
            listener_.reset();
            confirm_deadline_ = SetupClock::now() + settings_.connect_timeout;
            stage_ = Stage::Confirming;
            return confirm();
        case StepStatus::Failed:
            if (err.code == ETIMEDOUT)
                err.message = "the client did not complete its RDMA connection within connect_timeout "
                              "(pg_rdma.connect_timeout on a PostgreSQL server; raise it if clients set up "
                              "slowly under load): " +
                              err.message;
            return finish(UpgradeOutcome::TcpSame, std::move(err));
        case StepStatus::InProgress: break;
    }
    if (!tcp_readable(fd_)) return StepStatus::InProgress;
    fail(err, ECONNABORTED, "the client gave up on RDMA and continued on TCP");
    return finish(UpgradeOutcome::TcpSame, std::move(err));
}

// Our side is complete, but the client's may not be: it completes when our
// ring arrives, and its deadline may pass first. A PostgreSQL client speaks
// first, so its first bytes say which way it went; until then the session
// is on neither.
StepStatus ServerUpgrade::confirm() {
    Error err;
    const short ev = confirming_->poll_events(POLLIN | POLLRDHUP);
    if ((ev & POLLIN) != 0 && confirming_->unread_bytes() > 0) {
        result_.connection = std::move(confirming_);
        (void)result_.connection->attach_tcp(fd_);  // failover's path; without it the session just has none
        return finish(UpgradeOutcome::Rdma, {});
    }
    // Looked at, never read: they are the session's.
    std::uint8_t byte = 0;
    const ssize_t tcp = !tcp_closed_ && tcp_readable(fd_) ? io_.recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) : -1;
    if (tcp == 0) tcp_closed_ = true;  // no longer waited on: it would be readable for ever
    if (tcp > 0) {
        fail(err, ECONNABORTED, "the client gave up on RDMA as it completed, and continued on TCP");
        return finish(UpgradeOutcome::TcpSame, std::move(err));
    }
    if ((ev & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) != 0) {
        // It let go of the queue pair: whatever it says next comes on TCP.
        fail(err, ECONNABORTED, "the client abandoned its RDMA connection as it completed");
        if (const std::string why = confirming_->failure_reason(); !why.empty()) err.message += ": " + why;
        return finish(UpgradeOutcome::TcpSame, std::move(err));
    }
    // A TCP end of file alone decides nothing: a client on RDMA may close
    // its idle TCP socket. A client that holds a live connection and says
    // nothing for a whole budget keeps it (one that gives up lets go).
    if (passed(confirm_deadline_)) {
        result_.connection = std::move(confirming_);
        (void)result_.connection->attach_tcp(fd_);  // failover's path; without it the session just has none
        return finish(UpgradeOutcome::Rdma, {});
    }
    // fd() turns readable for what this names (want() waits on it).
    (void)confirming_->set_interest(POLLIN | POLLRDHUP);
    return StepStatus::InProgress;
}

StepStatus ServerUpgrade::finish(UpgradeOutcome outcome, Error why) noexcept {
    confirming_.reset();
    acceptor_.reset();
    listener_.reset();
    stage_ = Stage::Done;
    result_.outcome = outcome;
    result_.error = std::move(why);
    return StepStatus::Done;
}

Deadline ServerUpgrade::deadline() const noexcept {
    switch (stage_) {
        case Stage::AwaitingClient: return acceptor_->deadline();
        case Stage::Confirming: return confirm_deadline_;
        case Stage::Replying:
        case Stage::Done: break;
    }
    return deadline_;
}

Want ServerUpgrade::want() const noexcept {
    switch (stage_) {
        case Stage::Replying: return Want::one(fd_, POLLOUT);
        case Stage::AwaitingClient: return Want::plus(acceptor_->want(), fd_, POLLIN);
        case Stage::Confirming:
            if (tcp_closed_) return Want::one(confirming_->fd(), POLLIN);
            return Want::plus(Want::one(confirming_->fd(), POLLIN), fd_, POLLIN);
        case Stage::Done: break;
    }
    return Want::none();
}

UpgradeResult upgrade_server(int tcp_fd, const Settings& settings, const TcpIo& io,
                             ServerUpgrade::Decline decline) noexcept {
    ServerUpgrade upgrade(tcp_fd, settings, io, decline);
    return run_to_end(upgrade);
}

const char* to_string(ServerUpgrade::Stage stage) noexcept {
    switch (stage) {
        case ServerUpgrade::Stage::Replying: return "replying";
        case ServerUpgrade::Stage::AwaitingClient: return "awaiting the client's RDMA connection";
        case ServerUpgrade::Stage::Confirming: return "awaiting the client's first bytes";
        case ServerUpgrade::Stage::Done: return "done";
    }
    return "?";
}

}  // namespace pg_rdma::transport
