// Moving a session from its TCP connection onto RDMA (protocol/upgrade.hpp
// has the bytes), and what happens when that is not possible.
//
// The caller chooses the Mode; these functions report one of three outcomes,
// and never leave the TCP connection in an unknown state:
//   Rdma       - the session continues on `connection`; the TCP socket stays
//                open and idle (it is the session's identity for the server)
//   TcpSame    - the session continues on the same TCP connection, as if the
//                upgrade had never been asked for
//   TcpReconnect (client only) - the server does not know the request (no
//                pg_rdma) and has closed the connection: open a new TCP
//                connection and do not ask again
//   Failed     - Mode::Require and RDMA was not possible, or the TCP
//                connection itself broke
// In every outcome but Rdma, `error` says why RDMA was not used, for a log line.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <memory>

#include "transport/connection.hpp"
#include "transport/error.hpp"
#include "transport/settings.hpp"

namespace pg_rdma::transport {

// Raw I/O on the TCP socket. The server extension interposes send/recv in
// the backend, so it passes the real ones here.
struct TcpIo {
    ssize_t (*send)(int, const void*, std::size_t, int) = ::send;
    ssize_t (*recv)(int, void*, std::size_t, int) = ::recv;
};

enum class UpgradeOutcome { Rdma, TcpSame, TcpReconnect, Failed };
const char* to_string(UpgradeOutcome outcome);

struct UpgradeResult {
    UpgradeOutcome outcome = UpgradeOutcome::Failed;
    std::unique_ptr<Connection> connection;  // Rdma only
    Error error;                             // why not Rdma
};

// Client side: call right after the TCP connection is established, before
// anything else is sent on it. Works on blocking and non-blocking sockets;
// waits at most settings.connect_timeout.
UpgradeResult upgrade_client(int tcp_fd, Mode mode, const Settings& settings, const TcpIo& io = {});

// Server side: call once classify_first_packet() recognised the request
// (its 8 bytes consumed). Declines ('N') when this end cannot do RDMA, and
// accepts only an RDMA connection from the TCP peer's IP with the nonce it
// sent. If the client gives up on RDMA and talks on TCP instead, returns
// TcpSame without consuming those bytes.
UpgradeResult upgrade_server(int tcp_fd, const Settings& settings, const TcpIo& io = {});

}  // namespace pg_rdma::transport
