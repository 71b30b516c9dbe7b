// The last stage of both setups (Connector, Acceptor): the stream handshake
// on an established endpoint, as steps bounded by the setup's deadline. The
// one place setup touches Stream.
#pragma once

#include <memory>

#include "transport/connection.hpp"
#include "transport/endpoint.hpp"
#include "transport/setup_step.hpp"
#include "transport/stream.hpp"

namespace pg_rdma::transport {

class HandshakeStage {
public:
    // Starts the handshake on `endpoint` (connected: ESTABLISHED seen).
    bool start(std::unique_ptr<Endpoint> endpoint, Role role, Error& err);
    // Done: take_connection() has the connection. Failed (also when
    // deadline_for(setup_deadline) passed first): `err` says why and
    // nothing is held any more.
    StepStatus step(Deadline setup_deadline, Error& err);
    // The deadline this stage keeps, given the setup's. The passive side
    // that has sent its ring gets the setup's budget once more: the active
    // side may complete from then on, and a passive side that gave up at
    // the same deadline could leave it holding a connection nobody serves
    // (the active side gives up first: its budget ends no later than the
    // passive side's, protocol/upgrade.hpp). It still fails at once when
    // the active side goes away.
    [[nodiscard]] Deadline deadline_for(Deadline setup_deadline) const;
    // Readable when step() has something new to look at.
    [[nodiscard]] int fd() const;
    std::unique_ptr<Connection> take_connection() { return std::move(connection_); }

private:
    std::unique_ptr<Stream> stream_;
    std::unique_ptr<Connection> connection_;
    Role role_ = Role::Active;
    Deadline started_{};
};

}  // namespace pg_rdma::transport
