// The server-wide bound on what clients that have not authenticated yet can
// make this server hold: RDMA sessions in setup or past it but before
// authentication (each with a protection domain, a queue pair and pinned
// memory). Settings pg_rdma.max_unauthenticated_sessions and
// pg_rdma.max_unauthenticated_memory; a client over either cap is declined
// ('N') and continues on TCP, where PostgreSQL's own limits apply.
//
// A place is held from just before the RDMA setup until authentication ends
// (either way) or the session stays on TCP. A backend that exits before
// then (authentication_timeout, a signal: PostgreSQL's startup handlers
// _exit without callbacks) leaves a place that the next check finds dead
// (its process is gone, or it is older than twice authentication_timeout)
// and frees: nothing depends on an exit callback running.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pg_rdma::server {

// In the postmaster, from _PG_init: its parameters and shared memory.
void define_setup_gate_gucs();
void install_setup_gate_hooks();

// The parameters' combination with a session's pinned memory; nullptr when
// fine, else why not (checked at startup).
const char* setup_gate_problem(std::uint64_t session_pinned_bytes);

// In a backend, before its RDMA setup: takes a place for a session pinning
// `pinned_bytes`. False when over a cap; `why` then says which, for the
// decline's log line, and `log_now` whether this decline is the one that
// logs (at most one every kDeclineLogIntervalSeconds server-wide; the line
// counts the ones it stood for in `declined_since`).
struct GateRefusal {
    char why[256] = {};
    bool log_now = false;
    std::uint64_t declined_since = 0;
};
bool enter_setup_gate(std::uint64_t pinned_bytes, GateRefusal& refusal);

// Counts a decline decided before the gate (pg_hba.conf rejects the
// address) in the same server-wide rate limit as the gate's own: `refusal`
// says whether this one logs, and how many it stands for.
void count_decline(const char* why, GateRefusal& refusal);

// Gives the place back; does nothing without one.
void leave_setup_gate();

// The caps in force: sessions (-1 resolved to max_connections) and bytes.
struct SetupCaps {
    int sessions = 0;
    std::uint64_t memory_bytes = 0;
};
SetupCaps setup_caps();

}  // namespace pg_rdma::server
