// Takes over the postgres executable's socket calls (socket_hooks.hpp).
#pragma once

namespace pg_rdma::server {

// Called from _PG_init in the postmaster, before any fork and while no
// other thread runs (see interpose/got_patch.hpp). Does nothing when
// pg_rdma.listen_addresses is empty. When the executable does not import
// what is needed, logs one WARNING and leaves everything as it was: the
// server then serves those addresses over TCP only. Never stops the server.
void install_session_hooks();

// True once install_session_hooks() has patched the executable's slots
// (the hooks then pass every call that is not the session's to real_calls()).
bool session_hooks_installed() noexcept;

}  // namespace pg_rdma::server
