// What the SQL functions behind pg_stat_rdma and pg_stat_rdma_outgoing
// share: who may see a row's details (as pg_stat_activity decides: one's
// own role's rows, or every row with pg_read_all_stats), and empty text
// shown as NULL.
#pragma once

#include <cstdint>

#include "server_ext/pg_headers.hpp"

namespace pg_rdma::server {

// `row_role`: the Oid the row was made under, 0 for none (a walreceiver).
// `sees_all`: the caller has pg_read_all_stats (asked once per call).
inline bool shows_details(std::uint32_t row_role, bool sees_all) {
    return sees_all || (row_role != InvalidOid && has_privs_of_role(GetUserId(), static_cast<Oid>(row_role)));
}

inline Datum text_or_null(const char* s, bool& is_null) {
    is_null = s[0] == '\0';
    return is_null ? Datum{0} : CStringGetTextDatum(s);
}

}  // namespace pg_rdma::server
