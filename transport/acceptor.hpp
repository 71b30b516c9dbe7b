// The passive side of one RDMA connection as resumable steps
// (setup_step.hpp): wait on a Listener for the connection request that
// carries the expected nonce from the expected IP address (refusing any
// other), accept it, then the stream handshake. Every wait is on a
// descriptor, all of it is bounded by one deadline, and destroying the
// Acceptor at any step cancels it and releases what it made.
//
// Verbs resources are created in the calling process: never hand the
// result to a forked child.
#pragma once

#include <sys/socket.h>

#include <memory>

#include "protocol/upgrade.hpp"
#include "transport/connection.hpp"
#include "transport/error.hpp"
#include "transport/setup_step.hpp"

namespace pg_rdma::transport {

class Listener;

class Acceptor {
public:
    enum class Stage { AwaitingRequest, Accepting, Handshaking, Done, Failed };

    // Starts waiting on `listener`, which must outlive the Acceptor. With
    // `expected_peer`, only a request from that IP address (port ignored)
    // is accepted. Does no I/O; nullptr with `err` only without memory.
    static std::unique_ptr<Acceptor> start(Listener& listener, const protocol::Nonce& nonce,
                                           const sockaddr* expected_peer, Deadline deadline, Error& err) noexcept;
    ~Acceptor();
    Acceptor(const Acceptor&) = delete;
    Acceptor& operator=(const Acceptor&) = delete;

    // Advances as far as it can without waiting. Done: take_connection().
    // Failed (also once the deadline passed): `err` says why, and
    // everything but the listener is already released.
    StepStatus step(Error& err) noexcept;
    // One descriptor: the listener's, the accepted id's rdma_cm channel,
    // then the stream's fd.
    [[nodiscard]] Want want() const noexcept;
    // The setup's deadline, or later once the handshake has gone far enough
    // that the client may complete (HandshakeStage::deadline_for).
    [[nodiscard]] Deadline deadline() const noexcept;
    [[nodiscard]] Stage stage() const noexcept { return stage_; }
    // The connection after step() said Done; nullptr otherwise.
    std::unique_ptr<Connection> take_connection() noexcept;

private:
    class State;  // the accepted id and what follows, in acceptor.cpp
    Acceptor(std::unique_ptr<State> state, Deadline deadline) noexcept;
    StepStatus advance(Error& err);
    StepStatus await_request(Error& err);
    StepStatus await_established(Error& err);
    StepStatus fail_step(Error& err) noexcept;

    std::unique_ptr<State> state_;  // released as soon as the attempt ends
    Deadline deadline_;
    Stage stage_ = Stage::AwaitingRequest;
    Error failure_;  // what step() repeats after a failure
};

const char* to_string(Acceptor::Stage stage) noexcept;

}  // namespace pg_rdma::transport
