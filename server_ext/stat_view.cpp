// pg_stat_get_rdma(): the set-returning function behind the pg_stat_rdma
// view. One row per live slot (stat_slots.hpp).
//
// Two declarations meet this one function: 0.1's pg_stat_get_rdma(), eleven
// columns, revoked from PUBLIC, until ALTER EXTENSION pg_rdma UPDATE; 0.2's
// pg_stat_get_rdma_sessions(), thirteen (pg_rdma--0.1--0.2.sql), open to
// every role, which sees its own sessions' details as pg_stat_activity
// shows them, and other roles' only with pg_read_all_stats (else their pid
// alone). The declared row type says which is asked for.
#include "server_ext/stat_slots.hpp"

#include "server_ext/view_rows.hpp"

#include "server_ext/pg_headers.hpp"
#include "server_ext/pg_compat.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(pg_stat_get_rdma);
}

namespace {

constexpr int kColumnsV1 = 11;  // as declared in pg_rdma--0.1.sql
constexpr int kColumns = 13;    // as declared in pg_rdma--0.1--0.2.sql

}  // namespace

Datum pg_stat_get_rdma(PG_FUNCTION_ARGS) {
    auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    pg_rdma::server::compat::init_materialized_srf(fcinfo);
    const int columns = rsinfo->setDesc->natts;
    if (columns != kColumns && columns != kColumnsV1)
        ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                        errmsg("pg_rdma: pg_stat_rdma's function is declared with %d columns, not %d", columns, kColumns),
                        errhint("Run ALTER EXTENSION pg_rdma UPDATE.")));
    // 0.1's declaration is granted to privileged roles only.
    const bool sees_all = columns == kColumnsV1 || has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);

    for (int i = 0; i < pg_rdma::server::stat_slot_count(); ++i) {
        pg_rdma::server::StatRow r;
        if (!pg_rdma::server::read_stat_slot(i, r)) continue;
        r.client_addr[sizeof r.client_addr - 1] = '\0';
        r.device[sizeof r.device - 1] = '\0';
        r.reason[sizeof r.reason - 1] = '\0';

        Datum values[kColumns];
        bool nulls[kColumns] = {};
        values[0] = Int32GetDatum(r.pid);
        // Another role's session: its pid, nothing more.
        if (!pg_rdma::server::shows_details(r.role, sees_all)) {
            for (int c = 1; c < columns; ++c) nulls[c] = true;
            tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
            continue;
        }
        nulls[1] = r.client_addr[0] == '\0';
        values[1] = nulls[1] ? Datum{0} : DirectFunctionCall1(inet_in, CStringGetDatum(r.client_addr));
        values[2] = Int32GetDatum(r.client_port);
        values[3] = CStringGetTextDatum(r.transport == pg_rdma::server::SessionTransport::Rdma ? "rdma" : "tcp");
        values[4] = pg_rdma::server::text_or_null(r.device, nulls[4]);
        values[5] = Int32GetDatum(r.protocol_version);
        values[6] = Int64GetDatum(static_cast<int64>(r.bytes_sent));
        values[7] = Int64GetDatum(static_cast<int64>(r.bytes_received));
        values[8] = Int32GetDatum(static_cast<int32>(r.rx_buffer_size));
        values[9] = TimestampTzGetDatum(r.backend_start);
        values[10] = BoolGetDatum(r.failed_over);
        if (columns == kColumns) {
            values[11] = BoolGetDatum(r.requested);
            values[12] = pg_rdma::server::text_or_null(r.reason, nulls[12]);
        }
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    }
    return Datum{0};
}
