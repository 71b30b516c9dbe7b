// When a session's pg_stat_rdma row appears: once the client is
// authenticated. By then the backend has its PGPROC, and every way it can
// end runs the exit callbacks that release the row (proc_exit), or is a
// crash that makes the postmaster reinitialize shared memory. Before
// InitProcess, PostgreSQL's startup-packet handlers end a backend with
// _exit(1) on authentication_timeout or SIGTERM, running no callback.
#pragma once

namespace pg_rdma::server {

// Called from _PG_init: chains PostgreSQL's ClientAuthentication_hook.
void install_row_claim_hook();

}  // namespace pg_rdma::server
