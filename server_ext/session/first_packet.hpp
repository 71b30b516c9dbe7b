// The first bytes of a session on the client socket, looked at before
// PostgreSQL reads them: our upgrade request (protocol/upgrade.hpp) is
// consumed here; anything else (a startup packet, SSLRequest, CancelRequest)
// is left in the socket for PostgreSQL, untouched.
#pragma once

namespace pg_rdma::server {

enum class FirstPacket {
    NotYet,    // nothing decisive has arrived: say EAGAIN and be called again
    Other,     // PostgreSQL's to read (also EOF and socket errors)
    Cancel,    // a CancelRequest, left for PostgreSQL: not a session
    Empty,     // the client closed without sending a byte (a TCP health check): not a session
    Upgrade,   // our request, now consumed from the socket
    Probe,     // pgrdma doctor's probe, now consumed (protocol/probe.hpp)
};

// Peeks at the socket (non-blocking). A prefix of our request waits a
// little for the rest (a few 100 ms at most), so a slow client costs a
// sleep, not a spin of the backend's wait loop.
FirstPacket take_first_packet(int fd) noexcept;

// The one-byte 'N' reply: RDMA is not offered here; the client continues on
// this TCP connection. false when it could not be sent.
bool send_decline(int fd) noexcept;

}  // namespace pg_rdma::server
