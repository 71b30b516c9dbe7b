// Connection URIs: find the query the way libpq's URI parser does (rules in
// uri.hpp), then cut with_rsocket parameters out of it.
#include "libclient/conninfo/uri.hpp"

#include <vector>

namespace pg_rdma::conninfo {
namespace {

constexpr std::string_view kUriDesignator = "postgresql://";
constexpr std::string_view kShortUriDesignator = "postgres://";

std::optional<int> hex_digit(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return std::nullopt;
}

bool is_any_of(char c, std::string_view set) {
    return set.find(c) != std::string_view::npos;
}

// Offset of the '?' that starts the query, npos when there is none, nullopt
// when libpq would reject the part before it.
std::optional<std::size_t> find_query(std::string_view s, std::size_t prefix) {
    const std::size_t n = s.size();
    std::size_t p = prefix;

    std::size_t at = p;
    while (at < n && s[at] != '@' && s[at] != '/')
        ++at;
    if (at < n && s[at] == '@')
        p = at + 1;  // user[:password]@ skipped

    char terminator = '\0';
    for (;;) {
        if (p < n && s[p] == '[') {
            const std::size_t host = ++p;
            while (p < n && s[p] != ']')
                ++p;
            if (p == n || p == host)
                return std::nullopt;  // no matching ']' / empty IPv6 address
            ++p;
            if (p < n && !is_any_of(s[p], ":/?,"))
                return std::nullopt;  // unexpected character after ']'
        } else {
            while (p < n && !is_any_of(s[p], ":/?,"))
                ++p;
        }
        terminator = p < n ? s[p] : '\0';
        if (terminator == ':') {
            ++p;
            while (p < n && !is_any_of(s[p], "/?,"))
                ++p;
            terminator = p < n ? s[p] : '\0';
        }
        if (terminator != ',')
            break;
        ++p;
    }
    if (terminator == '/') {
        ++p;
        while (p < n && s[p] != '?')
            ++p;
        terminator = p < n ? s[p] : '\0';
    }
    return terminator == '?' ? p : std::string_view::npos;
}

struct Parameter {
    std::string_view text;  // "key=value" as written
    std::string key;        // decoded
    std::string value;      // decoded
};

// Splits and decodes the query; false where libpq would fail on its syntax.
bool parse_query(std::string_view query, std::vector<Parameter>& params, bool& trailing_ampersand) {
    const std::size_t n = query.size();
    std::size_t i = 0;
    trailing_ampersand = false;
    while (i < n) {
        const std::size_t begin = i;
        std::size_t equals = std::string_view::npos;
        while (i < n && query[i] != '&') {
            if (query[i] == '=') {
                if (equals != std::string_view::npos)
                    return false;  // extra key/value separator
                equals = i;
            }
            ++i;
        }
        if (equals == std::string_view::npos)
            return false;  // missing key/value separator (also an empty parameter)
        const std::string_view text = query.substr(begin, i - begin);
        std::optional<std::string> key = uri_decode(query.substr(begin, equals - begin));
        std::optional<std::string> value = uri_decode(query.substr(equals + 1, i - equals - 1));
        if (!key || !value)
            return false;
        params.push_back({text, std::move(*key), std::move(*value)});
        if (i < n) {
            ++i;  // the '&'
            trailing_ampersand = (i == n);
        }
    }
    return true;
}

}  // namespace

std::size_t uri_prefix_length(std::string_view conninfo) {
    if (conninfo.starts_with(kUriDesignator))
        return kUriDesignator.size();
    if (conninfo.starts_with(kShortUriDesignator))
        return kShortUriDesignator.size();
    return 0;
}

std::optional<std::string> uri_decode(std::string_view component) {
    std::string out;
    out.reserve(component.size());
    for (std::size_t i = 0; i < component.size(); ++i) {
        if (component[i] != '%') {
            out += component[i];
            continue;
        }
        if (i + 2 >= component.size())
            return std::nullopt;  // invalid percent-encoded token (cut short)
        const std::optional<int> hi = hex_digit(component[i + 1]);
        const std::optional<int> lo = hex_digit(component[i + 2]);
        if (!hi || !lo)
            return std::nullopt;  // invalid percent-encoded token
        const int c = (*hi << 4) | *lo;
        if (c == 0)
            return std::nullopt;  // forbidden value %00
        out += static_cast<char>(c);
        i += 2;
    }
    return out;
}

Extraction extract_from_uri(std::string_view uri) {
    uri = uri.substr(0, uri.find('\0'));
    Extraction result;
    result.rewritten.assign(uri);

    const std::size_t prefix = uri_prefix_length(uri);
    const std::optional<std::size_t> question = prefix == 0 ? std::nullopt : find_query(uri, prefix);
    if (!question) {
        result.status = ExtractStatus::SyntaxError;
        return result;
    }
    if (*question == std::string_view::npos)
        return result;  // no query, so no with_rsocket

    std::vector<Parameter> params;
    bool trailing_ampersand = false;
    if (!parse_query(uri.substr(*question + 1), params, trailing_ampersand)) {
        result.status = ExtractStatus::SyntaxError;
        return result;
    }

    std::string query;
    for (const Parameter& param : params) {
        if (param.key == kKeyword) {
            result.value = param.value;  // the last one wins
            ++result.occurrences;
            continue;
        }
        if (!query.empty())
            query += '&';
        query.append(param.text);
    }
    if (result.occurrences == 0)
        return result;

    result.rewritten.assign(uri.substr(0, *question));
    if (!query.empty()) {
        result.rewritten += '?';
        result.rewritten += query;
        if (trailing_ampersand)
            result.rewritten += '&';
    }
    return result;
}

}  // namespace pg_rdma::conninfo
