// with_rsocket in keyword/value connection strings ("host=db with_rsocket=true"),
// by libpq's own lexical rules (fe-connect.c conninfo_parse, identical in 15):
//   - whitespace (isspace() in the caller's locale, as libpq) separates pairs
//     and may surround '=';
//   - a keyword ends at '=' or whitespace; a '=' must follow (else libpq:
//     `missing "=" after "..." in connection info string`);
//   - a value in single quotes runs to the next unescaped quote; backslash
//     escapes the next byte; no closing quote is an error (`unterminated
//     quoted string in connection info string`); the next pair may follow
//     the closing quote with no whitespace (`host='a'port=5`);
//   - an unquoted value runs to the first unescaped whitespace; a backslash
//     escapes the next byte (`a\ b` is "a b"); a quote inside is literal;
//     a trailing lone backslash is dropped;
//   - keywords are case-sensitive, the last occurrence of a keyword wins.
#pragma once

#include <string_view>

#include "libclient/conninfo/extraction.hpp"

namespace pg_rdma::conninfo {

// Removes every with_rsocket pair. The rewritten string keeps every other
// pair's bytes; a pair is removed with the whitespace that follows it (or,
// when it was last, with the whitespace before it), so neighbours never
// merge. If nothing is left the result is "" (so a dbname that held only
// with_rsocket stays an empty, unexpanded value; see keyword_arrays.hpp).
// The view is read up to its first NUL, as libpq reads a C string.
Extraction extract_from_keyword_value(std::string_view conninfo);

}  // namespace pg_rdma::conninfo
