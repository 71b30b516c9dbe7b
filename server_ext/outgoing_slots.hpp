// The shared-memory rows behind pg_stat_rdma_outgoing: one per libpq
// connection a server process made itself (the walreceiver, logical
// replication workers, postgres_fdw, dblink), whichever transport it took.
// A process may hold several (two dblink connections), so the array is not
// pg_stat_rdma's one-per-backend: kOutgoingSlotsPerBackend times
// MaxBackends, and a connection made when all are taken has no row (nor
// one past a process's 64th at once). Slots are claimed and written
// without locks, as pg_stat_rdma's are (outgoing_slots.cpp).
//
// Life cycle as pg_stat_rdma's (stat_slots.hpp): sized and created by the
// postmaster's shared-memory hooks, claimed by the connecting process once
// its connection is up (libpq_side/outgoing_rows.cpp), released at PQfinish
// and, for what is left, by an on_proc_exit callback; a crash-restart makes
// the array anew.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server_ext/stat_slots.hpp"

namespace pg_rdma::server {

inline constexpr int kOutgoingSlotsPerBackend = 4;

struct OutgoingIdentity {
    std::string_view remote_addr;  // numeric host, as inet input accepts it; empty when unknown
    int remote_port = 0;
    std::string_view transport;    // "rdma", "tcp" or "unix"
    std::string_view device;       // on RDMA
    std::string_view requested;    // "true", "require", "false"; empty when unknown
    std::string_view reason;       // why on TCP
    std::uint32_t role = 0;        // Oid of the role the process runs as; 0 for none (walreceiver)
};

struct OutgoingRow {
    int pid;
    char remote_addr[kStatFieldSize];
    int remote_port;
    char transport[kStatFieldSize];
    char device[kStatFieldSize];
    char requested[kStatFieldSize];
    char reason[kStatReasonSize];
    std::uint32_t role;
    std::int64_t connected_at;  // TimestampTz
};

// Called from _PG_init: chains shmem_request_hook and shmem_startup_hook.
void install_outgoing_slot_hooks();

// Once per process before its first claim, from C-style code (no C++
// object alive): registers the exit callback that frees its slots, which
// raises a FATAL when the process has too many such callbacks.
void prepare_outgoing_slots();

// A row for one connection of this process; -1 when every slot is taken,
// the array is not there or prepare_outgoing_slots() was not called.
// Never raises a PostgreSQL error.
int claim_outgoing_slot(const OutgoingIdentity& identity);
void release_outgoing_slot(int index);

int outgoing_slot_count();
// false when slot `index` holds no connection. May raise a PostgreSQL
// error (CHECK_FOR_INTERRUPTS while it retries): call it from C-style code.
bool read_outgoing_slot(int index, OutgoingRow& out);

}  // namespace pg_rdma::server
