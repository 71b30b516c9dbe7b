// pg_rdma.listen_addresses in the postmaster: the addresses are added to
// PostgreSQL's listen_addresses so the postmaster accepts TCP on them.
#pragma once

namespace pg_rdma::server {

// Called from _PG_init, before the postmaster opens its sockets. Stops the
// server (ERROR in the postmaster) when the list is malformed; logs one
// WARNING that RDMA sessions are not available yet when it is not empty.
void add_rdma_listen_addresses();

}  // namespace pg_rdma::server
