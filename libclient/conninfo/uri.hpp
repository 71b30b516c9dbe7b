// with_rsocket in connection URIs, by libpq's rules (fe-connect.c
// conninfo_uri_parse_options / _params / _decode, identical in 15):
//
//   postgres[ql]://[user[:password]@][host][:port][,...][/dbname][?k=v[&k=v...]]
//
//   - the prefix is case-sensitive; credentials end at the first '@' found
//     before any '/'; each host ends at ':' '/' '?' or ',' unless it is an
//     IPv6 literal in brackets (then it may contain any of those; `[`
//     unclosed, `[]`, or a byte other than ':' '/' '?' ',' after ']' are
//     errors); a port ends at '/' '?' ','; the dbname runs to the first '?';
//     so the query is whatever follows the first '?' after that point;
//   - query parameters are separated by '&'; each needs exactly one '='
//     (`missing`/`extra key/value separator "=" in URI query parameter`);
//     a single trailing '&' is allowed, an empty parameter ("&&") is not;
//   - keyword and value are percent-decoded: '%' must be followed by two hex
//     digits (`invalid percent-encoded token`), %00 is refused (`forbidden
//     value %00 in percent-encoded value`);
//   - the last occurrence of a parameter wins.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "libclient/conninfo/extraction.hpp"

namespace pg_rdma::conninfo {

// Length of the URI designator `conninfo` starts with ("postgresql://" or
// "postgres://"), 0 when it is not a URI.
std::size_t uri_prefix_length(std::string_view conninfo);

// libpq's percent-decoding of one URI component; nullopt where libpq fails.
std::optional<std::string> uri_decode(std::string_view component);

// Removes every query parameter whose decoded keyword is with_rsocket
// (`with%5Frsocket=true` too). Everything before the '?' and every other
// parameter is kept byte for byte, joined by '&' as before (a trailing '&'
// stays); when no parameter is left the '?' goes too. SyntaxError for a
// malformed host part or query (the string is then returned untouched);
// errors libpq finds elsewhere (a bad %-escape in the host or dbname) are
// left in place for libpq to report.
// The view is read up to its first NUL, as libpq reads a C string.
Extraction extract_from_uri(std::string_view uri);

}  // namespace pg_rdma::conninfo
