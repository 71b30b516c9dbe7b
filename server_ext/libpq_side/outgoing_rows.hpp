// pg_stat_rdma_outgoing's rows for this process's libpq connections
// (outgoing_slots.hpp): claimed by the trampolines (pq_trampolines.cpp)
// once a connection is up, with what libpq_rdma.so says about it
// (PQrdmaInUse, PQrdmaAttribute) and the address libpq connected to;
// released at PQfinish. None of these throws; note_connection_made may
// raise a FATAL once per process, before it holds any C++ object (too many
// exit callbacks: prepare_outgoing_slots()).
#pragma once

#include <libpq-fe.h>

namespace pg_rdma::server {

// After a connection attempt returned: a row when `conn` is up and has
// none yet.
void note_connection_made(PGconn* conn) noexcept;
// Before PQfinish: its row goes.
void note_connection_finished(PGconn* conn) noexcept;

}  // namespace pg_rdma::server
