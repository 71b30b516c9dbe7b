// pg_stat_get_rdma_outgoing(): the set-returning function behind the
// pg_stat_rdma_outgoing view (pg_rdma--0.2--0.3.sql), one row per live
// slot of outgoing_slots.hpp. Who sees what, as for pg_stat_rdma: a role
// its own processes' connections, pg_read_all_stats every one; of the
// others, and of processes that run as no role (the walreceiver), the pid
// alone.
#include "server_ext/outgoing_slots.hpp"

#include "server_ext/view_rows.hpp"

#include "server_ext/pg_headers.hpp"
#include "server_ext/pg_compat.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(pg_stat_get_rdma_outgoing);
}

namespace {

constexpr int kColumns = 8;  // as declared in pg_rdma--0.2--0.3.sql

}  // namespace

Datum pg_stat_get_rdma_outgoing(PG_FUNCTION_ARGS) {
    auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    pg_rdma::server::compat::init_materialized_srf(fcinfo);
    if (rsinfo->setDesc->natts != kColumns)
        ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                        errmsg("pg_rdma: pg_stat_rdma_outgoing's function is declared with %d columns, not %d",
                               rsinfo->setDesc->natts, kColumns),
                        errhint("Run ALTER EXTENSION pg_rdma UPDATE.")));
    const bool sees_all = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);
    for (int i = 0; i < pg_rdma::server::outgoing_slot_count(); ++i) {
        pg_rdma::server::OutgoingRow r;
        if (!pg_rdma::server::read_outgoing_slot(i, r)) continue;
        r.remote_addr[sizeof r.remote_addr - 1] = '\0';
        r.transport[sizeof r.transport - 1] = '\0';
        r.device[sizeof r.device - 1] = '\0';
        r.requested[sizeof r.requested - 1] = '\0';
        r.reason[sizeof r.reason - 1] = '\0';
        Datum values[kColumns];
        bool nulls[kColumns] = {};
        values[0] = Int32GetDatum(r.pid);
        if (!pg_rdma::server::shows_details(r.role, sees_all)) {
            for (int c = 1; c < kColumns; ++c) nulls[c] = true;
            tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
            continue;
        }
        nulls[1] = r.remote_addr[0] == '\0';
        values[1] = nulls[1] ? Datum{0} : DirectFunctionCall1(inet_in, CStringGetDatum(r.remote_addr));
        values[2] = Int32GetDatum(r.remote_port);
        values[3] = pg_rdma::server::text_or_null(r.transport, nulls[3]);
        values[4] = pg_rdma::server::text_or_null(r.device, nulls[4]);
        values[5] = pg_rdma::server::text_or_null(r.requested, nulls[5]);
        values[6] = pg_rdma::server::text_or_null(r.reason, nulls[6]);
        values[7] = TimestampTzGetDatum(r.connected_at);
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    }
    return Datum{0};
}
