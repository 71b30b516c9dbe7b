// Keyword/value connection strings: a scanner that follows libpq's
// conninfo_parse() byte for byte (rules in keyword_value.hpp), recording where
// each pair starts and ends so the rewrite can cut pairs out without
// re-quoting anything.
#include "libclient/conninfo/keyword_value.hpp"

#include <cctype>
#include <string>
#include <vector>

namespace pg_rdma::conninfo {
namespace {

// libpq tests with isspace() on the byte as unsigned char, in whatever locale
// the application set; doing the same keeps both scanners in agreement.
bool is_space(char c) {
    return std::isspace(static_cast<unsigned char>(c)) != 0;
}

struct Pair {
    std::size_t key_begin;  // first byte of the keyword
    std::size_t value_end;  // one past the value (past the closing quote if quoted)
    std::string key;
    std::string value;      // unquoted, unescaped
};

// Scans the whole string; false on a syntax error libpq would report.
bool scan(std::string_view s, std::vector<Pair>& pairs) {
    const std::size_t n = s.size();
    std::size_t i = 0;
    while (i < n) {
        if (is_space(s[i])) {
            ++i;
            continue;
        }
        Pair pair{i, 0, {}, {}};
        while (i < n && s[i] != '=' && !is_space(s[i]))
            ++i;
        pair.key.assign(s.substr(pair.key_begin, i - pair.key_begin));
        while (i < n && is_space(s[i]))
            ++i;
        if (i == n || s[i] != '=')
            return false;  // missing "=" after the keyword
        ++i;
        while (i < n && is_space(s[i]))
            ++i;

        if (i < n && s[i] == '\'') {
            ++i;
            for (;;) {
                if (i == n)
                    return false;  // unterminated quoted string
                if (s[i] == '\\') {
                    ++i;
                    if (i < n)
                        pair.value += s[i++];
                    continue;
                }
                if (s[i] == '\'') {
                    ++i;
                    break;
                }
                pair.value += s[i++];
            }
            pair.value_end = i;
        } else {
            while (i < n && !is_space(s[i])) {
                if (s[i] == '\\') {
                    ++i;
                    if (i < n)
                        pair.value += s[i++];
                } else {
                    pair.value += s[i++];
                }
            }
            pair.value_end = i;  // the whitespace that ends it (if any) stays a separator
        }
        pairs.push_back(std::move(pair));
    }
    return true;
}

}  // namespace

Extraction extract_from_keyword_value(std::string_view conninfo) {
    conninfo = conninfo.substr(0, conninfo.find('\0'));
    Extraction result;
    result.rewritten.assign(conninfo);

    std::vector<Pair> pairs;
    if (!scan(conninfo, pairs)) {
        result.status = ExtractStatus::SyntaxError;
        return result;
    }

    std::vector<bool> removed(pairs.size(), false);
    for (std::size_t p = 0; p < pairs.size(); ++p) {
        if (pairs[p].key == kKeyword) {
            removed[p] = true;
            result.value = pairs[p].value;  // the last one wins
            ++result.occurrences;
        }
    }
    if (result.occurrences == 0)
        return result;

    // Each kept pair brings the separator that followed it. A kept pair with
    // removed pairs after it and none kept ends the string at its value.
    std::size_t last_kept = pairs.size();
    for (std::size_t p = 0; p < pairs.size(); ++p)
        if (!removed[p])
            last_kept = p;
    std::string out;
    if (last_kept != pairs.size()) {
        out.assign(conninfo.substr(0, pairs.front().key_begin));
        for (std::size_t p = 0; p <= last_kept; ++p) {
            if (removed[p])
                continue;
            std::size_t end = conninfo.size();
            if (p == last_kept) {
                if (p + 1 < pairs.size())
                    end = pairs[p].value_end;
            } else if (p + 1 < pairs.size()) {
                end = pairs[p + 1].key_begin;
            }
            out.append(conninfo.substr(pairs[p].key_begin, end - pairs[p].key_begin));
        }
    }
    result.rewritten = std::move(out);
    return result;
}

}  // namespace pg_rdma::conninfo
