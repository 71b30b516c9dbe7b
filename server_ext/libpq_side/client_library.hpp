// with_rsocket for the libpq connections a server process makes itself: the
// walreceiver (primary_conninfo), logical replication workers (a
// subscription's CONNECTION), postgres_fdw and dblink.
//
// Those callers load libpq.so.5 after pg_rdma.so, which PostgreSQL opened
// RTLD_GLOBAL from shared_preload_libraries, so their PQconnect* calls (and
// libpq's own calls between its functions, made through its PLT) reach the
// exported trampolines in pq_trampolines.cpp first. On the first one in a
// process, this module loads the client library (pg_rdma.client_library,
// libpq_rdma.so, RTLD_LOCAL: its socket wrappers do not enter the global
// scope) and
//   - points libpq.so.5's own GOT slots for its socket calls (connect, close,
//     recv, send, read, write, poll, getsockopt, setsockopt, getsockname)
//     and for fopen (the service file) at the library's wrappers, which pass
//     every descriptor but an upgraded connection's to libc;
//   - routes the postgres executable's epoll_ctl/epoll_wait through the
//     library's (WaitLatchOrSocket on PQsocket()): through the session
//     hooks' real calls when they are installed, else by patching the
//     executable's two slots in this process.
// So only the sockets of connections that ask for RDMA are redirected; the
// backend's own client session is the session hooks' business either way.
// After fork, in the process that connects: verbs resources stay there.
#pragma once

namespace pg_rdma::server {

enum class State { NotTried, Ready, Unusable };

// Loads and installs the client library in this process on the first call
// made under the postmaster (a failure is logged once, naming the reason;
// an empty pg_rdma.client_library is off, silently). NotTried in the
// postmaster itself, which decides nothing for its children.
State client_state() noexcept;

// libpq_rdma.so's function `name` when the state is Ready, else nullptr
// (the caller then uses libpq's own function).
void* client_function(const char* name) noexcept;

// PostgreSQL 15.14+ lets server-side libpq users (dblink, postgres_fdw,
// libpqwalreceiver, through libpq-be-fe-helpers.h) pass only the options
// libpqsrv_is_valid_proxy_option() blesses, and that list cannot know ours.
// Points that function's import slot in every loaded library at one that
// also blesses with_rsocket (an option that only chooses the transport:
// no file, no environment, no credentials). Called before each connection
// or option check, since those libraries load when first used.
void allow_with_rsocket_in_proxy_checks() noexcept;

// In _PG_init: a WARNING when libpq.so.5 is already loaded (a library
// preloaded before pg_rdma links it), because its definitions then come
// first in the global scope and the trampolines are never reached.
void warn_if_libpq_loaded_first() noexcept;

// libpq.so.5's own definition of `name` (not our trampoline); nullptr when
// libpq is not loaded.
void* libpq_function(const char* name) noexcept;

}  // namespace pg_rdma::server
