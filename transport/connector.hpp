// The active side of an RDMA connection as resumable steps (setup_step.hpp):
// resolve the address, resolve the route, connect presenting the nonce,
// then the stream handshake. Every wait is on a descriptor, all of it is
// bounded by one deadline, and destroying the Connector at any step cancels
// the attempt and releases every rdma_cm and verbs resource it made.
//
// Verbs resources are created in the calling process: never hand the
// result to a forked child.
#pragma once

#include <sys/socket.h>

#include <memory>
#include <string>

#include "protocol/upgrade.hpp"
#include "transport/connection.hpp"
#include "transport/error.hpp"
#include "transport/settings.hpp"
#include "transport/setup_step.hpp"

namespace pg_rdma::transport {

class Connector {
public:
    enum class Stage { ResolvingAddress, ResolvingRoute, Connecting, Handshaking, Done, Failed };

    // Issues rdma_resolve_addr for `dst` and returns without waiting. `src`,
    // when given, is the local address to connect from (its port is
    // ignored): a multi-homed client passes its TCP connection's local
    // address so the server sees RDMA come from the peer it knows.
    // nullptr with `err` when even that fails.
    static std::unique_ptr<Connector> start(const sockaddr* dst, const sockaddr* src, const protocol::Nonce& nonce,
                                            const Settings& settings, Deadline deadline, Error& err) noexcept;
    ~Connector();
    Connector(const Connector&) = delete;
    Connector& operator=(const Connector&) = delete;

    // Advances as far as it can without waiting. Done: take_connection().
    // Failed (also once the deadline passed): `err` says why, and
    // everything is already released.
    StepStatus step(Error& err) noexcept;
    // One descriptor: the rdma_cm channel, then the stream's fd.
    [[nodiscard]] Want want() const noexcept;
    [[nodiscard]] Deadline deadline() const noexcept { return deadline_; }
    [[nodiscard]] Stage stage() const noexcept { return stage_; }
    // The connection after step() said Done; nullptr otherwise.
    std::unique_ptr<Connection> take_connection() noexcept;

private:
    class State;  // the rdma_cm and verbs resources, in connector.cpp
    Connector(std::unique_ptr<State> state, Deadline deadline) noexcept;
    StepStatus advance(Error& err);
    StepStatus await_cm_event(Error& err);
    StepStatus fail_step(Error& err) noexcept;

    std::unique_ptr<State> state_;  // released as soon as the attempt ends
    Deadline deadline_;
    Stage stage_ = Stage::ResolvingAddress;
    Error failure_;  // what step() repeats after a failure
};

const char* to_string(Connector::Stage stage) noexcept;

}  // namespace pg_rdma::transport
