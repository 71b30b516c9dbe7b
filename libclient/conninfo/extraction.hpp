// What taking with_rsocket out of one connection string yields.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "libclient/conninfo/policy.hpp"

namespace pg_rdma::conninfo {

enum class ExtractStatus {
    Ok,           // parsed; `rewritten` is the string to hand to libpq
    SyntaxError,  // libpq would reject the string's syntax: `rewritten` is the
                  // original, untouched, so libpq reports its own error
};

struct Extraction {
    ExtractStatus status = ExtractStatus::Ok;
    // The value libpq would have stored for with_rsocket had it known the
    // keyword: the last occurrence, unquoted / unescaped / percent-decoded.
    // Absent when the string does not set it (and on SyntaxError).
    std::optional<std::string> value;
    // The string without any with_rsocket; equal to the original when the
    // string had none or on SyntaxError. Everything else is kept byte for byte.
    std::string rewritten;
    std::size_t occurrences = 0;  // with_rsocket settings removed

    // The policy the string asks for, or nullopt when it does not say.
    // Only the last value counts, as libpq validates only the value it keeps.
    [[nodiscard]] std::optional<PolicyValue> policy() const {
        if (!value)
            return std::nullopt;
        return parse_policy_value(*value);
    }
};

}  // namespace pg_rdma::conninfo
