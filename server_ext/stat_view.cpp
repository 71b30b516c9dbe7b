// pg_stat_get_rdma(): the set-returning function behind the pg_stat_rdma
// view (pg_rdma--0.1.sql). One row per live slot (stat_slots.hpp).
#include "server_ext/stat_slots.hpp"

#include "server_ext/pg_headers.hpp"
#include "server_ext/pg_compat.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(pg_stat_get_rdma);
}

namespace {

constexpr int kColumns = 11;  // as declared in pg_rdma--0.1.sql

Datum text_or_null(const char* s, bool& is_null) {
    is_null = s[0] == '\0';
    return is_null ? Datum{0} : CStringGetTextDatum(s);
}

}  // namespace

Datum pg_stat_get_rdma(PG_FUNCTION_ARGS) {
    auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    pg_rdma::server::compat::init_materialized_srf(fcinfo);

    for (int i = 0; i < pg_rdma::server::stat_slot_count(); ++i) {
        pg_rdma::server::StatRow r;
        if (!pg_rdma::server::read_stat_slot(i, r)) continue;
        r.client_addr[sizeof r.client_addr - 1] = '\0';
        r.device[sizeof r.device - 1] = '\0';

        Datum values[kColumns];
        bool nulls[kColumns] = {};
        values[0] = Int32GetDatum(r.pid);
        nulls[1] = r.client_addr[0] == '\0';
        values[1] = nulls[1] ? Datum{0} : DirectFunctionCall1(inet_in, CStringGetDatum(r.client_addr));
        values[2] = Int32GetDatum(r.client_port);
        values[3] = CStringGetTextDatum(r.transport == pg_rdma::server::SessionTransport::Rdma ? "rdma" : "tcp");
        values[4] = text_or_null(r.device, nulls[4]);
        values[5] = Int32GetDatum(r.protocol_version);
        values[6] = Int64GetDatum(static_cast<int64>(r.bytes_sent));
        values[7] = Int64GetDatum(static_cast<int64>(r.bytes_received));
        values[8] = Int32GetDatum(static_cast<int32>(r.rx_buffer_size));
        values[9] = TimestampTzGetDatum(r.backend_start);
        values[10] = BoolGetDatum(r.failed_over);
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    }
    return Datum{0};
}
