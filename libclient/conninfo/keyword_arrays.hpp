// with_rsocket in the keyword/value arrays of PQconnectdbParams and
// PQconnectStartParams, by libpq's rules (fe-connect.c conninfo_array_parse,
// identical in 15, confirmed against libpq.so.5):
//   - the arrays end at the first NULL keyword; an entry whose value is NULL
//     or "" is skipped entirely, even for a keyword libpq does not know;
//   - otherwise entries apply in order, a later one overriding an earlier;
//   - with expand_dbname, the first "dbname" entry whose value is not NULL is
//     looked at: if that value is a URI or contains '=', it is parsed as a
//     connection string and its settings (empty values included) apply at
//     that entry's place in the order; if not, no dbname is ever expanded.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "libclient/conninfo/extraction.hpp"

namespace pg_rdma::conninfo {

// NULL-terminated keyword and value arrays that own their strings, to pass
// to libpq as they are. A NULL value stays NULL. Move-only: the pointer
// arrays point into the strings.
class KeywordArrays {
public:
    KeywordArrays() { rebuild_pointers(); }
    KeywordArrays(const KeywordArrays&) = delete;
    KeywordArrays& operator=(const KeywordArrays&) = delete;
    KeywordArrays(KeywordArrays&&) noexcept = default;
    KeywordArrays& operator=(KeywordArrays&&) noexcept = default;
    ~KeywordArrays() = default;

    void append(std::string keyword, std::optional<std::string> value);

    [[nodiscard]] const char* const* keywords() const { return keyword_pointers_.data(); }
    [[nodiscard]] const char* const* values() const { return value_pointers_.data(); }
    [[nodiscard]] std::size_t size() const { return keywords_.size(); }

private:
    void rebuild_pointers();

    std::vector<std::string> keywords_;
    std::vector<std::optional<std::string>> values_;
    std::vector<const char*> keyword_pointers_;  // size() + 1, last is nullptr
    std::vector<const char*> value_pointers_;    // size() + 1, last is nullptr
};

struct ArraysExtraction {
    // SyntaxError: the dbname libpq would expand is a malformed connection
    // string; `arrays` is then an unchanged copy, so libpq reports it.
    ExtractStatus status = ExtractStatus::Ok;
    // The with_rsocket value libpq's order of application would keep (from an
    // entry, or from the expanded dbname), absent when nothing sets it.
    std::optional<std::string> value;
    // The arrays without with_rsocket entries; an expanded dbname has its
    // with_rsocket removed (becoming "" when nothing else was in it, which
    // libpq then skips exactly as it skipped the expansion's empty result).
    KeywordArrays arrays;
    std::size_t occurrences = 0;  // with_rsocket entries removed, the dbname's included

    [[nodiscard]] std::optional<PolicyValue> policy() const {
        if (!value)
            return std::nullopt;
        return parse_policy_value(*value);
    }
};

ArraysExtraction extract_from_keyword_arrays(const char* const* keywords, const char* const* values,
                                             bool expand_dbname);

}  // namespace pg_rdma::conninfo
