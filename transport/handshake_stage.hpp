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
    // `deadline` passed first): `err` says why and nothing is held any more.
    StepStatus step(Deadline deadline, Error& err);
    // Readable when step() has something new to look at.
    [[nodiscard]] int fd() const;
    std::unique_ptr<Connection> take_connection() { return std::move(connection_); }

private:
    std::unique_ptr<Stream> stream_;
    std::unique_ptr<Connection> connection_;
};

}  // namespace pg_rdma::transport
