// pg_stat_get_rdma_outcomes(), pg_stat_get_rdma_devices() and
// pg_stat_reset_rdma(): the SQL side of the cumulative counters
// (stat_totals.hpp; views in pg_rdma--0.1--0.2.sql).
#include "server_ext/stat_totals.hpp"

#include "server_ext/pg_headers.hpp"
#include "server_ext/pg_compat.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(pg_stat_get_rdma_outcomes);
PG_FUNCTION_INFO_V1(pg_stat_get_rdma_devices);
PG_FUNCTION_INFO_V1(pg_stat_reset_rdma);
}

namespace {

constexpr int kOutcomeColumns = 4;  // as declared in pg_rdma--0.1--0.2.sql
constexpr int kDeviceColumns = 6;

Datum timestamp_or_null(std::int64_t at, bool& is_null) {
    is_null = at == 0;
    return is_null ? Datum{0} : TimestampTzGetDatum(at);
}

}  // namespace

Datum pg_stat_get_rdma_outcomes(PG_FUNCTION_ARGS) {
    using namespace pg_rdma::server;
    auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    compat::init_materialized_srf(fcinfo);
    if (!stat_totals_ready()) return Datum{0};
    const std::int64_t reset_at = stat_totals_reset_at();
    for (std::size_t i = 0; i < kOutcomeCount; ++i) {
        const auto outcome = static_cast<Outcome>(i);
        const OutcomeTotals t = read_outcome_totals(outcome);
        const std::string_view name = outcome_name(outcome);
        Datum values[kOutcomeColumns];
        bool nulls[kOutcomeColumns] = {};
        values[0] = PointerGetDatum(cstring_to_text_with_len(name.data(), static_cast<int>(name.size())));
        values[1] = Int64GetDatum(static_cast<int64>(t.sessions));
        values[2] = timestamp_or_null(t.last_at, nulls[2]);
        values[3] = timestamp_or_null(reset_at, nulls[3]);
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    }
    return Datum{0};
}

Datum pg_stat_get_rdma_devices(PG_FUNCTION_ARGS) {
    using namespace pg_rdma::server;
    auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    compat::init_materialized_srf(fcinfo);
    const std::int64_t reset_at = stat_totals_reset_at();
    for (std::size_t i = 0; i < kMaxDevices; ++i) {
        DeviceTotals d;
        if (!read_device_totals(i, d)) continue;
        Datum values[kDeviceColumns];
        bool nulls[kDeviceColumns] = {};
        values[0] = CStringGetTextDatum(d.name);
        values[1] = Int64GetDatum(static_cast<int64>(d.sessions));
        values[2] = Int64GetDatum(static_cast<int64>(d.failovers));
        values[3] = Int64GetDatum(static_cast<int64>(d.bytes_sent));
        values[4] = Int64GetDatum(static_cast<int64>(d.bytes_received));
        values[5] = timestamp_or_null(reset_at, nulls[5]);
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    }
    return Datum{0};
}

Datum pg_stat_reset_rdma(PG_FUNCTION_ARGS) {
    (void)fcinfo;
    pg_rdma::server::reset_stat_totals();
    PG_RETURN_VOID();
}
