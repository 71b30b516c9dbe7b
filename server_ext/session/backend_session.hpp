// This backend's client session as the socket hooks see it. One per
// process; a backend has exactly one client socket. Verbs resources exist
// only once a backend upgraded (never in the postmaster, which only ever
// sees the Undecided state it was created in).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "server_ext/session/rdma_session.hpp"
#include "server_ext/session/wait_registrations.hpp"
#include "server_ext/stat_slots.hpp"

namespace pg_rdma::server {

enum class SessionPhase {
    Undecided,  // before the session's first read
    Tcp,        // PostgreSQL's own TCP path; the hooks only count bytes
    Rdma,       // every call on the client socket goes to `rdma`
    Probed,     // a probe was answered (probe_answer.hpp): the client socket reads as
                // an end of stream, whatever the client sent after its request
};

// What this session's pg_stat_rdma row will say, kept from the decision until
// the row is claimed after authentication (claim_pending_row).
struct PendingRow {
    static constexpr std::size_t kHostSize = 1025;  // NI_MAXHOST, bytes
    char client_addr[kHostSize] = {};
    int client_port = 0;
    SessionTransport transport = SessionTransport::Tcp;
    char device[kStatFieldSize] = {};
    int protocol_version = 0;
    std::uint32_t rx_buffer_size = 0;
    bool failed_over = false;  // RDMA failed mid-session and the session went on over TCP
    bool requested = false;    // the client sent an upgrade request
    char reason[kStatReasonSize] = {};  // why on TCP, when it asked
    std::uint32_t role = 0;             // the authenticated role's Oid (claim_pending_row)
};

struct BackendSession {
    SessionPhase phase = SessionPhase::Undecided;
    int client_fd = -1;                 // once decided
    bool tracked = false;               // on a pg_rdma address: bytes counted, a row due
    PendingRow row;                     // tracked: the row's identity
    bool shown = false;                 // the pg_stat_rdma row is claimed
    WaitRegistrations pending;          // Undecided: epoll sets holding the client socket
    std::unique_ptr<RdmaSession> rdma;  // Rdma
    std::uint64_t bytes_sent = 0;       // running totals, either transport
    std::uint64_t bytes_received = 0;
    bool failure_logged = false;
};

BackendSession& backend_session() noexcept;

// Decides the session on its first read of `fd` (session_start.cpp): our
// upgrade request moves it onto RDMA, anything else leaves it on TCP.
// false: nothing decisive arrived yet (the read says EAGAIN). May end the
// backend with FATAL (an upgrade that broke the TCP connection).
bool start_session(int fd);

// Claims the pg_stat_rdma row of a tracked session (row_claim.cpp calls it
// once the session is authenticated as `role`, an Oid: who may see the
// row's details) and publishes its counters so far.
void claim_pending_row(std::uint32_t role);

// After a failed read or write on the RDMA connection: logs why, once.
void log_rdma_failure();
// After successful I/O: the pg_stat_rdma counters, and the row's move to
// 'tcp' once the connection failed over.
void publish_counters();
// The connection moved onto TCP: the row says so, the log says why (once).
void note_failover();

}  // namespace pg_rdma::server
