// pg_rdma_check_server(): the SQL side of server_check.hpp (declared in
// pg_rdma--0.2--0.3.sql). It opens an rdma_cm id per listen address in
// this backend, for the moment of the check: verbs resources in the
// process that uses them, never in the postmaster.
#include "server_ext/server_check.hpp"
#include "server_ext/settings_gucs.hpp"
#include "server_ext/setup_gate.hpp"
#include "transport/event_set.hpp"

#include "server_ext/pg_headers.hpp"
#include "server_ext/pg_compat.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(pg_rdma_check_server);
}

namespace {

constexpr int kCheckColumns = 4;  // item, target, status, detail

// The rows as plain C strings in malloc'd memory, so that the function
// below, which may raise PostgreSQL errors, holds no C++ object.
struct CheckTable {
    std::size_t rows = 0;
    char** cells = nullptr;  // rows * kCheckColumns strings
};

void free_table(CheckTable& t) {
    for (std::size_t i = 0; t.cells != nullptr && i < t.rows * kCheckColumns; ++i) std::free(t.cells[i]);
    std::free(t.cells);
    t = {};
}

// Runs the checks; false with `why` when something failed (no C++
// exception may reach PostgreSQL).
bool gather(CheckTable& table, char (&why)[256]) noexcept {
    using namespace pg_rdma::server;
    try {
        CheckInputs in;
        const char* listen = rdma_listen_addresses_guc();
        in.listen_addresses = listen != nullptr ? listen : "";
        in.postmaster_pid = PostmasterPid;
        in.session_bytes = session_pinned_bytes();
        in.descriptors_per_session = pg_rdma::transport::kDescriptorsPerConnection;
        in.max_files_per_process = max_files_per_process;
        const SetupCaps caps = setup_caps();
        in.max_unauthenticated_sessions = caps.sessions;
        in.max_unauthenticated_memory = caps.memory_bytes;
        const char* library = client_library_guc();
        in.client_library = library != nullptr ? library : "";
        const std::vector<CheckRow> rows = check_server(in);
        table.cells = static_cast<char**>(std::calloc(rows.size() * kCheckColumns + 1, sizeof(char*)));
        if (table.cells == nullptr) throw std::bad_alloc();
        table.rows = rows.size();
        for (std::size_t i = 0; i < rows.size(); ++i) {
            const std::string* cells[kCheckColumns] = {&rows[i].item, &rows[i].target, &rows[i].status, &rows[i].detail};
            for (int c = 0; c < kCheckColumns; ++c)
                if ((table.cells[i * kCheckColumns + c] = strdup(cells[c]->c_str())) == nullptr) throw std::bad_alloc();
        }
        return true;
    } catch (const std::exception& e) {
        snprintf(why, sizeof why, "%s", e.what());
    } catch (...) {
        snprintf(why, sizeof why, "unknown error");
    }
    free_table(table);
    return false;
}

}  // namespace

Datum pg_rdma_check_server(PG_FUNCTION_ARGS) {
    auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    pg_rdma::server::compat::init_materialized_srf(fcinfo);
    CheckTable table;
    char why[256] = {};
    if (!gather(table, why))
        ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("pg_rdma: the server check failed: %s", why)));
    for (std::size_t i = 0; i < table.rows; ++i) {
        Datum values[kCheckColumns];
        bool nulls[kCheckColumns] = {};
        for (int c = 0; c < kCheckColumns; ++c) values[c] = CStringGetTextDatum(table.cells[i * kCheckColumns + c]);
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    }
    free_table(table);
    return Datum{0};
}
