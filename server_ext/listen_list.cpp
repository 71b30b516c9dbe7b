#include "server_ext/listen_list.hpp"

#include <algorithm>
#include <cctype>

namespace pg_rdma::server {
namespace {

constexpr std::string_view kBlanks = " \t\r\n";
constexpr std::string_view kWildcard = "*";

std::string_view trimmed(std::string_view s) {
    const auto first = s.find_first_not_of(kBlanks);
    if (first == std::string_view::npos) return {};
    return s.substr(first, s.find_last_not_of(kBlanks) - first + 1);
}

// Host names, IPv4 and IPv6 literals (with a %zone), or "*".
bool plausible_address(std::string_view s) {
    if (s == kWildcard) return true;
    return std::all_of(s.begin(), s.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return std::isalnum(u) || c == '.' || c == '-' || c == ':' || c == '%' || c == '_';
    });
}

bool same_address(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

std::vector<std::string> split_lenient(std::string_view text) {
    std::vector<std::string> out;
    while (!text.empty()) {
        const auto comma = text.find(',');
        const auto item = trimmed(text.substr(0, comma));
        if (!item.empty()) out.emplace_back(item);
        if (comma == std::string_view::npos) break;
        text.remove_prefix(comma + 1);
    }
    return out;
}

}  // namespace

AddressList parse_address_list(std::string_view text) {
    AddressList list;
    if (trimmed(text).empty()) return list;
    for (;;) {
        const auto comma = text.find(',');
        const auto item = trimmed(text.substr(0, comma));
        if (item.empty()) {
            list.problem = "the list has an empty item";
            return list;
        }
        if (!plausible_address(item)) {
            list.problem = "\"" + std::string(item) + "\" is not a host name or address";
            return list;
        }
        list.items.emplace_back(item);
        if (comma == std::string_view::npos) return list;
        text.remove_prefix(comma + 1);
    }
}

std::string merged_listen_addresses(std::string_view existing, const std::vector<std::string>& extra) {
    auto all = split_lenient(existing);
    const auto has_wildcard = [](const std::vector<std::string>& v) {
        return std::find(v.begin(), v.end(), kWildcard) != v.end();
    };
    if (has_wildcard(all) || has_wildcard(extra)) return std::string(kWildcard);
    for (const auto& address : extra) {
        const bool present = std::any_of(all.begin(), all.end(),
                                         [&](const std::string& a) { return same_address(a, address); });
        if (!present) all.push_back(address);
    }
    std::string joined;
    for (const auto& a : all) {
        if (!joined.empty()) joined += ',';
        joined += a;
    }
    return joined;
}

}  // namespace pg_rdma::server
