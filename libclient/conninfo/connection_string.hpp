// Which parser libpq applies to a connection string, and the dispatch to ours.
// libpq (parse_connection_string): a string that starts with "postgresql://"
// or "postgres://" is a URI, anything else is keyword/value. In a keyword
// array with expand_dbname, the dbname value is expanded only when it is
// "recognized": a URI, or a string that contains '=' anywhere.
#pragma once

#include <string_view>

#include "libclient/conninfo/extraction.hpp"

namespace pg_rdma::conninfo {

bool is_uri(std::string_view conninfo);
bool is_recognized_connection_string(std::string_view conninfo);

// What PQconnectdb / PQconnectStart / PQconninfoParse receive: a URI or a
// keyword/value string.
Extraction extract_from_connection_string(std::string_view conninfo);

}  // namespace pg_rdma::conninfo
