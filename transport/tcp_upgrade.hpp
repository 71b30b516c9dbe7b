// Moving a session from its TCP connection onto RDMA (protocol/upgrade.hpp
// has the bytes), and what happens when that is not possible.
//
// The caller chooses the Mode; the upgrade reports one of these outcomes,
// and never leaves the TCP connection in an unknown state:
//   Rdma       - the session continues on `connection`; the TCP socket stays
//                open and idle (it is the session's identity for the server)
//   TcpSame    - the session continues on the same TCP connection, as if the
//                upgrade had never been asked for
//   TcpReconnect (client only) - the server does not know the request (no
//                pg_rdma) and has closed the connection, or its reply did
//                not come in time: open a new TCP connection and do not
//                ask again
//   Failed     - Mode::Require and RDMA was not possible, or the TCP
//                connection itself broke
// In every outcome but Rdma, `error` says why RDMA was not used, for a log line.
//
// Each side comes as resumable steps (ClientUpgrade, ServerUpgrade, driven
// as setup_step.hpp says) and as a blocking call over them. The whole
// upgrade, RDMA connection and handshake included, is bounded: the
// deadlines are ClientUpgrade's and ServerUpgrade's below.
// Destroying an upgrade object at any step abandons the upgrade and
// releases everything it made; the TCP socket is the caller's and stays
// open, in a state only fit for closing.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <optional>

#include "protocol/probe.hpp"
#include "protocol/upgrade.hpp"
#include "transport/connection.hpp"
#include "transport/error.hpp"
#include "transport/settings.hpp"
#include "transport/setup_step.hpp"

namespace pg_rdma::transport {

class Acceptor;
class Connector;
class Listener;

// Raw I/O on the TCP socket. The server extension interposes send/recv in
// the backend, so it passes the real ones here. Steps call them with
// MSG_DONTWAIT, so they never wait even on a blocking socket.
struct TcpIo {
    ssize_t (*send)(int, const void*, std::size_t, int) = ::send;
    ssize_t (*recv)(int, void*, std::size_t, int) = ::recv;
};

enum class UpgradeOutcome { Rdma, TcpSame, TcpReconnect, Failed };
const char* to_string(UpgradeOutcome outcome) noexcept;

struct UpgradeResult {
    UpgradeOutcome outcome = UpgradeOutcome::Failed;
    std::unique_ptr<Connection> connection;  // Rdma only
    Error error;                             // why not Rdma
    // Client, Request::Probe: the server's 'D' reply, when it declined.
    std::optional<protocol::ProbeDecline> probe_decline;
    // Server, Decline::ByCaller: this end cannot do RDMA and nothing was
    // sent yet; the caller replies (error says why).
    bool decline_unsent = false;
};

// What the client asks for: a session's upgrade, or the probe of
// `pgrdma doctor` (protocol/probe.hpp), which the server answers with an
// echo over RDMA or a decline that says why.
enum class Request { Session, Probe };

// Client side: construct right after the TCP connection is established,
// before anything else is sent on it, and call step() at once. It binds the
// RDMA connection to the TCP connection's local address (so a multi-homed
// client reaches the server from the address the server knows it by) and
// refuses a reply that names another address than the TCP peer unless
// settings.allow_redirect says otherwise; a refusal falls back per `mode`,
// the server seeing the client continue on TCP.
class ClientUpgrade {
public:
    enum class Stage { SendingRequest, AwaitingReply, Connecting, Done };

    // The reply is awaited until `limits.reply` (now + connect_timeout by
    // default; a caller that bounds the whole connection itself, as
    // libpq's connect_timeout does, passes Deadline::max()): that wait is
    // the server's startup, which a TCP session waits for as well. The RDMA
    // setup then gets connect_timeout from the reply, or the server's own
    // budget if that is less, and ends by `limits.rdma_latest` at the
    // latest (so that a fallback leaves the caller time for TCP). A reply
    // that does not come in time is a TcpReconnect (prefer) or Failed
    // (require).
    struct Limits {
        Deadline reply;
        Deadline rdma_latest = Deadline::max();
    };
    ClientUpgrade(int tcp_fd, Mode mode, const Settings& settings, const TcpIo& io = {}) noexcept;
    ClientUpgrade(int tcp_fd, Mode mode, const Settings& settings, const TcpIo& io, Limits limits,
                  Request request = Request::Session) noexcept;
    ~ClientUpgrade();
    ClientUpgrade(const ClientUpgrade&) = delete;
    ClientUpgrade& operator=(const ClientUpgrade&) = delete;

    // InProgress or Done, never Failed: a failed upgrade is an outcome of
    // the result. Done: take_result().
    StepStatus step() noexcept;
    // Always exactly one descriptor: the TCP socket, then the RDMA setup's.
    [[nodiscard]] Want want() const noexcept;
    // When the current stage ends: the reply's deadline, then the RDMA
    // setup's. Call step() once it has passed.
    [[nodiscard]] Deadline deadline() const noexcept { return deadline_; }
    [[nodiscard]] Stage stage() const noexcept { return stage_; }
    // The result once step() said Done (moved out: call once).
    UpgradeResult take_result() noexcept { return std::move(result_); }

private:
    StepStatus advance();
    StepStatus send_request();
    StepStatus receive_reply();
    StepStatus receive_probe_decline();
    StepStatus on_reply();
    StepStatus connect_rdma();
    StepStatus finish(UpgradeOutcome outcome, Error why) noexcept;
    StepStatus fall_back(UpgradeOutcome prefer_outcome, Error why) noexcept;

    int fd_;
    Mode mode_;
    Request request_kind_;
    Settings settings_;
    TcpIo io_;
    Deadline deadline_;  // the current stage's
    Deadline rdma_latest_;
    Stage stage_ = Stage::SendingRequest;
    bool started_ = false;
    sockaddr_storage local_{};  // the TCP connection's, port 0: the RDMA source
    sockaddr_storage peer_{};
    protocol::UpgradeRequestBytes request_{};
    std::size_t request_sent_ = 0;
    protocol::UpgradeAcceptBytes reply_{};
    std::size_t reply_received_ = 0;
    std::vector<std::uint8_t> probe_decline_;  // a probe's 'D' reply, as it arrives
    std::size_t probe_decline_received_ = 0;
    std::unique_ptr<Connector> connector_;
    UpgradeResult result_;
};

// Server side: construct once classify_first_packet() recognised the
// request (its 8 bytes consumed), and call step() at once. Declines ('N')
// when this end cannot do RDMA, and accepts only an RDMA connection from
// the TCP peer's IP with the nonce it sent. If the client gives up on RDMA
// and talks on TCP instead (or closes), returns TcpSame without consuming
// those bytes. The client decides: once our side is complete the outcome
// is Rdma only when the client's first bytes come over RDMA (a PostgreSQL
// client speaks first), or when it holds the connection without a word for
// another connect_timeout; bytes on TCP, or a client that lets the queue
// pair go, make it TcpSame. So both ends always agree, whenever the
// client's deadline passes.
class ServerUpgrade {
public:
    enum class Stage { Replying, AwaitingClient, Confirming, Done };
    // Who says 'no' when this end cannot do RDMA: the upgrade ('N'), or
    // the caller (a probe's 'D', which carries the server's reason): the
    // result is then TcpSame with decline_unsent and nothing sent.
    enum class Decline { Send, ByCaller };

    ServerUpgrade(int tcp_fd, const Settings& settings, const TcpIo& io = {},
                  Decline decline = Decline::Send) noexcept;
    ~ServerUpgrade();
    ServerUpgrade(const ServerUpgrade&) = delete;
    ServerUpgrade& operator=(const ServerUpgrade&) = delete;

    // InProgress or Done, never Failed: a failed upgrade is an outcome of
    // the result. Done: take_result().
    StepStatus step() noexcept;
    // The TCP socket while replying; then the RDMA setup's descriptor (the
    // connection's, while confirming) and the TCP socket (readable: the
    // client gave up on RDMA).
    [[nodiscard]] Want want() const noexcept;
    [[nodiscard]] Deadline deadline() const noexcept;
    [[nodiscard]] Stage stage() const noexcept { return stage_; }
    // The result once step() said Done (moved out: call once).
    UpgradeResult take_result() noexcept { return std::move(result_); }

private:
    StepStatus advance();
    void prepare_reply();
    bool open_endpoint(protocol::Nonce& nonce, Error& err);
    StepStatus send_reply();
    StepStatus await_client();
    StepStatus confirm();
    StepStatus finish(UpgradeOutcome outcome, Error why) noexcept;

    int fd_;
    Settings settings_;
    TcpIo io_;
    Decline decline_;
    Deadline deadline_;
    Stage stage_ = Stage::Replying;
    bool started_ = false;
    // 'R' and the endpoint, or a lone 'N'; sent from reply_[0].
    protocol::UpgradeAcceptBytes reply_{};
    std::size_t reply_size_ = 0;
    std::size_t reply_sent_ = 0;
    Error decline_reason_;  // set when the reply is 'N'
    // Declared before the acceptor, which borrows it: destroyed after it.
    std::unique_ptr<Listener> listener_;
    std::unique_ptr<Acceptor> acceptor_;
    // Confirming: our side is complete; the client's first bytes decide.
    std::unique_ptr<Connection> confirming_;
    Deadline confirm_deadline_{};
    bool tcp_closed_ = false;  // the client closed its TCP side while confirming
    UpgradeResult result_;
};

// Blocking forms: step to the end, waiting on want() in between; a signal
// is no reason to stop (EINTR keeps waiting, only the deadline ends it).
UpgradeResult upgrade_client(int tcp_fd, Mode mode, const Settings& settings, const TcpIo& io = {}) noexcept;
UpgradeResult upgrade_server(int tcp_fd, const Settings& settings, const TcpIo& io = {},
                             ServerUpgrade::Decline decline = ServerUpgrade::Decline::Send) noexcept;

const char* to_string(ClientUpgrade::Stage stage) noexcept;
const char* to_string(ServerUpgrade::Stage stage) noexcept;

}  // namespace pg_rdma::transport
