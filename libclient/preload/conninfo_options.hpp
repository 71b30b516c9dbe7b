// libpq's PQconninfoOption arrays, seen from this library: which service a
// connection names, and with_rsocket added to the arrays libpq hands out
// (PQconninfoParse, PQconndefaults, PQconninfo) so that programs which
// check or echo options (psql's \connect, pg_dumpall, pg_basebackup -R)
// accept and keep it.
#pragma once

#include <libpq-fe.h>

#include <optional>
#include <string>

namespace pg_rdma::client {

// The `service` a connection string (keyword/value or URI, with_rsocket
// already taken out) sets, as libpq's own parser reads it; nullopt when it
// sets none or libpq cannot parse it (libpq then reports that itself).
std::optional<std::string> service_in_string(const char* conninfo) noexcept;

// The same for keyword arrays in libpq's order of application: a later
// non-empty entry wins, and with expand_dbname the first dbname that is a
// connection string counts at its place.
std::optional<std::string> service_in_arrays(const char* const* keywords, const char* const* values,
                                             bool expand_dbname) noexcept;

// `options` (malloc'd by libpq, freed by PQconninfoFree: it frees each val
// and the array, never the keyword or label strings) with a with_rsocket
// entry before its end marker whose val is a malloc'd copy of `value`
// (NULL when absent). Returns `options` unchanged if memory runs out.
PQconninfoOption* with_rsocket_option(PQconninfoOption* options, const std::optional<std::string>& value) noexcept;

}  // namespace pg_rdma::client
