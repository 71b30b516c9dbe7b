// Value spellings of with_rsocket (rules in policy.hpp).
#include "libclient/conninfo/policy.hpp"

#include <array>

namespace pg_rdma::conninfo {
namespace {

char ascii_lower(char c) {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

// `value` is a case-insensitive prefix of `word`, at least `min_length` long.
bool is_prefix_of(std::string_view value, std::string_view word, std::size_t min_length) {
    if (value.size() < min_length || value.size() > word.size())
        return false;
    for (std::size_t i = 0; i < value.size(); ++i)
        if (ascii_lower(value[i]) != word[i])
            return false;
    return true;
}

bool equals_ignoring_case(std::string_view value, std::string_view word) {
    return value.size() == word.size() && is_prefix_of(value, word, word.size());
}

}  // namespace

std::string_view policy_name(RsocketPolicy policy) {
    switch (policy) {
    case RsocketPolicy::Off: return "off";
    case RsocketPolicy::Prefer: return "prefer";
    case RsocketPolicy::Require: return "require";
    }
    return "unknown";
}

std::optional<bool> parse_pg_bool(std::string_view value) {
    struct Word {
        std::string_view text;
        std::size_t min_length;  // shortest prefix that names it alone
        bool result;
    };
    // "on" and "off" share their first letter, so they need two; the digits
    // are whole words of one letter.
    static constexpr std::array<Word, 8> kWords{{
        {"true", 1, true}, {"false", 1, false}, {"yes", 1, true}, {"no", 1, false},
        {"on", 2, true}, {"off", 2, false}, {"1", 1, true}, {"0", 1, false},
    }};
    for (const Word& word : kWords)
        if (is_prefix_of(value, word.text, word.min_length))
            return word.result;
    return std::nullopt;
}

PolicyValue parse_policy_value(std::string_view value) {
    if (equals_ignoring_case(value, "require"))
        return {RsocketPolicy::Require, {}};
    if (const std::optional<bool> b = parse_pg_bool(value))
        return {*b ? RsocketPolicy::Prefer : RsocketPolicy::Off, {}};
    return {std::nullopt, invalid_value_message(value)};
}

std::string invalid_value_message(std::string_view value) {
    std::string message = "invalid ";
    message += kKeyword;
    message += " value: \"";
    message += value;
    message += "\"\n";
    return message;
}

}  // namespace pg_rdma::conninfo
