// The shared-memory rows behind the pg_stat_rdma view: one slot per session
// that reached a pg_rdma address, written only by the backend that owns it.
//
// Life cycle: _PG_init installs the hooks (install_stat_slot_hooks); the
// postmaster sizes the array in shmem_request_hook and creates it in
// shmem_startup_hook; a backend whose session came to a pg_rdma address
// claims a slot once the client is authenticated (claim_stat_slot, from
// session/row_claim.cpp: after InitProcess, so every exit but a crash runs
// the callback that releases it, and a crash makes the postmaster create
// shared memory anew), updates it while the session runs, and releases it
// at exit (an on_proc_exit callback does it if the session code did not).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace pg_rdma::server {

enum class SessionTransport : std::uint8_t { Tcp = 0, Rdma = 1 };

struct SessionIdentity {
    std::string_view client_addr;   // numeric host, as inet input accepts it
    int client_port = 0;
    SessionTransport transport = SessionTransport::Tcp;
    std::string_view device;        // RDMA device name; empty for TCP
    int protocol_version = 0;       // 0 for TCP
    std::uint32_t rx_buffer_size = 0;  // bytes; 0 for TCP
    bool failed_over = false;       // began on RDMA, moved onto TCP when it failed
    bool requested = false;         // the client sent an upgrade request
    std::string_view reason;        // why the session is on TCP; empty on RDMA or when not asked
    std::uint32_t role = 0;         // the session's role (Oid); 0 until authenticated
};

// Called from _PG_init: chains shmem_request_hook and shmem_startup_hook.
void install_stat_slot_hooks();

// This backend's slot. claim returns false when every slot is taken (the
// session then runs without a row). Strings longer than a slot's field are
// cut. None of these throws or raises a PostgreSQL error.
bool claim_stat_slot(const SessionIdentity& identity);
void update_stat_identity(const SessionIdentity& identity);  // e.g. after the upgrade
void update_stat_counters(std::uint64_t bytes_sent, std::uint64_t bytes_received);  // running totals
void release_stat_slot();

// For the view: a consistent copy of one slot.
inline constexpr std::size_t kStatFieldSize = 64;     // bytes of a text field, NUL included
inline constexpr std::size_t kStatReasonSize = 256;   // bytes of the reason, NUL included
struct StatRow {
    int pid;
    char client_addr[kStatFieldSize];
    int client_port;
    SessionTransport transport;
    char device[kStatFieldSize];
    int protocol_version;
    std::uint32_t rx_buffer_size;
    std::uint64_t bytes_sent;
    std::uint64_t bytes_received;
    std::int64_t backend_start;  // TimestampTz
    bool failed_over;
    bool requested;
    char reason[kStatReasonSize];
    std::uint32_t role;  // Oid of the session's role, for who may see the row; 0 when unknown
};
int stat_slot_count();
// false when slot `index` holds no live session. May raise a PostgreSQL
// error (CHECK_FOR_INTERRUPTS while it retries): call it from C-style code.
bool read_stat_slot(int index, StatRow& out);

}  // namespace pg_rdma::server
