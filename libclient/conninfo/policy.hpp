// The value of the `with_rsocket` connection parameter and what it asks for.
//
// Spellings (libclient/README.md): PostgreSQL's boolean spellings, exactly as
// the backend's parse_bool() accepts them, plus `require`:
//   true, yes, on, 1 and their unique prefixes  -> Prefer  (RDMA, TCP fallback)
//   false, no, off, 0 and their unique prefixes -> Off     (plain libpq)
//   require                                     -> Require (RDMA or fail)
// All ASCII case-insensitive, no whitespace trimmed. Anything else, the empty
// string included (libpq rejects `sslmode=''` the same way), is invalid.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace pg_rdma::conninfo {

// The keyword as written in conninfo strings, URIs, keyword arrays and
// pg_service.conf sections, and the environment variable that sets a default.
inline constexpr std::string_view kKeyword = "with_rsocket";
inline constexpr const char* kEnvironmentVariable = "WITH_RSOCKET";

enum class RsocketPolicy { Off, Prefer, Require };

// "off", "prefer", "require": for log lines.
std::string_view policy_name(RsocketPolicy policy);

// The backend's parse_bool(): true, false, yes, no, on, off, 1, 0, case
// insensitive, and prefixes of the words that cannot be confused ("t", "fa",
// "y", "of", but not "o"); "1" and "0" only as themselves.
std::optional<bool> parse_pg_bool(std::string_view value);

struct PolicyValue {
    std::optional<RsocketPolicy> policy;  // set when the value is valid
    std::string error;                    // otherwise libpq's wording, see invalid_value_message

    [[nodiscard]] bool ok() const { return policy.has_value(); }
};

PolicyValue parse_policy_value(std::string_view value);

// `invalid with_rsocket value: "maybe"` followed by a newline: the shape
// libpq 15 gives PQerrorMessage() for `sslmode=maybe` or
// `target_session_attrs=maybe`, newline included.
std::string invalid_value_message(std::string_view value);

}  // namespace pg_rdma::conninfo
