// pg_rdma.so: the PostgreSQL side of the RDMA transport.
//
// Loaded only through shared_preload_libraries. _PG_init runs in the
// postmaster before it opens its sockets and before shared memory exists;
// it defines the pg_rdma.* parameters, checks them, adds
// pg_rdma.listen_addresses to listen_addresses, and installs the hooks that
// create the pg_stat_rdma slots and the cumulative counters. It never
// touches an RDMA device: verbs resources are created only by a backend,
// after fork.
//
// Errors: PostgreSQL errors (ereport) are raised only from C-style code
// with no C++ object alive on the stack; C++ code below catches its own
// exceptions and reports by value.
#include "server_ext/listen_setup.hpp"
#include "server_ext/libpq_side/client_library.hpp"
#include "server_ext/session/install.hpp"
#include "server_ext/settings_gucs.hpp"
#include "server_ext/setup_gate.hpp"
#include "server_ext/outgoing_slots.hpp"
#include "server_ext/stat_slots.hpp"
#include "server_ext/stat_totals.hpp"

#include "server_ext/pg_headers.hpp"

extern "C" {
PG_MODULE_MAGIC;
PGDLLEXPORT void _PG_init(void);
}

namespace {

// The combination of pg_rdma.* values, checked once at startup: an ERROR in
// the postmaster stops it with the message, before any session exists.
void check_settings_or_stop() {
    std::string_view problem = pg_rdma::server::settings_gucs_problem();
    if (problem.empty())
        if (const char* gate = pg_rdma::server::setup_gate_problem(pg_rdma::server::session_pinned_bytes()))
            problem = gate;
    if (problem.empty()) return;
    ereport(ERROR,
            (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
             errmsg("pg_rdma: invalid configuration: %.*s", static_cast<int>(problem.size()), problem.data()),
             errhint("Correct the pg_rdma.* settings in postgresql.conf (names without the \"pg_rdma.\" "
                     "prefix above).")));
}

}  // namespace

void _PG_init(void) {
    if (!process_shared_preload_libraries_in_progress)
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("pg_rdma can only be loaded through shared_preload_libraries"),
                 errhint("Add 'pg_rdma' to shared_preload_libraries in postgresql.conf and restart the server.")));

    pg_rdma::server::define_settings_gucs();
    pg_rdma::server::define_setup_gate_gucs();
    MarkGUCPrefixReserved("pg_rdma");
    check_settings_or_stop();
    pg_rdma::server::add_rdma_listen_addresses();
    pg_rdma::server::install_stat_slot_hooks();
    pg_rdma::server::install_outgoing_slot_hooks();
    pg_rdma::server::install_stat_totals_hooks();
    pg_rdma::server::install_setup_gate_hooks();
    pg_rdma::server::install_session_hooks();
    pg_rdma::server::warn_if_libpq_loaded_first();
}
