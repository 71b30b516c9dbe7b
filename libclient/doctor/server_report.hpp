// pgrdma doctor --server CONNINFO: the running server's own check
// (pg_rdma_check_server(), in the extension from 0.3), asked over an
// ordinary libpq connection: its listen addresses against their RDMA
// ports, the postmaster's limits, the caps, the client library.
#pragma once

#include <string>

namespace pg_rdma::doctor {

// Prints the rows and a verdict; returns the exit code (verdict.hpp's:
// 0 no problem, 3 a problem, 5 no pg_rdma 0.3 in that database, 6 no
// connection, 2 a role that may not run the check).
// `timeout_s`: libpq's connect_timeout unless the string sets its own.
int report_server(const std::string& conninfo, int timeout_s, bool quiet);

}  // namespace pg_rdma::doctor
