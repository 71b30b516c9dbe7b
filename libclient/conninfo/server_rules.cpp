#include "libclient/conninfo/server_rules.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>
#include <cstring>

namespace pg_rdma::conninfo {
namespace {

constexpr int kIpv4Bits = 32;
constexpr int kIpv6Bits = 128;
constexpr std::size_t kIpv4MappedPrefix = 12;  // bytes: ::ffff:0:0/96
constexpr std::uint8_t kMappedMarker[kIpv4MappedPrefix] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

std::vector<std::string_view> fields_of(std::string_view line) {
    std::vector<std::string_view> fields;
    std::size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
        std::size_t end = i;
        while (end < line.size() && line[end] != ' ' && line[end] != '\t' && line[end] != '\r') ++end;
        if (end > i) fields.push_back(line.substr(i, end - i));
        i = end;
    }
    return fields;
}

// "ADDRESS[/PREFIX]" into `rule`; an error text, or "" when it reads.
std::string read_address(std::string_view field, ServerRule& rule) {
    const std::size_t slash = field.find('/');
    const std::string address(field.substr(0, slash));
    if (inet_pton(AF_INET, address.c_str(), rule.address.data()) == 1) {
        rule.family = AF_INET;
        rule.prefix_bits = kIpv4Bits;
    } else if (inet_pton(AF_INET6, address.c_str(), rule.address.data()) == 1) {
        rule.family = AF_INET6;
        rule.prefix_bits = kIpv6Bits;
    } else {
        return "\"" + address + "\" is not an IPv4 or IPv6 address (host names are not accepted)";
    }
    if (slash != std::string_view::npos) {
        const std::string_view bits = field.substr(slash + 1);
        int value = -1;
        const auto [end, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), value);
        if (ec != std::errc{} || end != bits.data() + bits.size() || value < 0 || value > rule.prefix_bits)
            return "\"" + std::string(bits) + "\" is not a prefix length for that address";
        rule.prefix_bits = value;
    }
    // An IPv4-mapped IPv6 address is an IPv4 one (match() sees them so).
    if (rule.family == AF_INET6 && rule.prefix_bits >= 8 * static_cast<int>(kIpv4MappedPrefix) &&
        std::memcmp(rule.address.data(), kMappedMarker, kIpv4MappedPrefix) == 0) {
        std::memmove(rule.address.data(), rule.address.data() + kIpv4MappedPrefix, 4);
        std::memset(rule.address.data() + 4, 0, rule.address.size() - 4);
        rule.family = AF_INET;
        rule.prefix_bits -= 8 * static_cast<int>(kIpv4MappedPrefix);
    }
    return {};
}

std::string read_port(std::string_view field, ServerRule& rule) {
    if (field == "*") return {};
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
    if (ec != std::errc{} || end != field.data() + field.size() || value == 0 || value > 65535)
        return "\"" + std::string(field) + "\" is not a port (1-65535) or *";
    rule.port = static_cast<std::uint16_t>(value);
    return {};
}

bool prefix_matches(const std::uint8_t* a, const std::uint8_t* b, int bits) noexcept {
    const int whole = bits / 8;
    if (std::memcmp(a, b, static_cast<std::size_t>(whole)) != 0) return false;
    const int rest = bits % 8;
    if (rest == 0) return true;
    const auto mask = static_cast<std::uint8_t>(0xff << (8 - rest));
    return (a[whole] & mask) == (b[whole] & mask);
}

}  // namespace

std::optional<RsocketPolicy> ServerRules::match(const sockaddr* addr, socklen_t len) const noexcept {
    if (addr == nullptr || rules_.empty()) return std::nullopt;
    int family = 0;
    const std::uint8_t* bytes = nullptr;
    std::uint16_t port = 0;
    if (addr->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
        family = AF_INET;
        bytes = reinterpret_cast<const std::uint8_t*>(&in->sin_addr);
        port = ntohs(in->sin_port);
    } else if (addr->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
        bytes = reinterpret_cast<const std::uint8_t*>(&in6->sin6_addr);
        port = ntohs(in6->sin6_port);
        family = AF_INET6;
        if (std::memcmp(bytes, kMappedMarker, kIpv4MappedPrefix) == 0) {
            family = AF_INET;
            bytes += kIpv4MappedPrefix;
        }
    } else {
        return std::nullopt;
    }
    const ServerRule* best = nullptr;
    for (const ServerRule& rule : rules_) {
        if (rule.family != family || (rule.port != 0 && rule.port != port)) continue;
        if (!prefix_matches(rule.address.data(), bytes, rule.prefix_bits)) continue;
        if (best == nullptr || rule.prefix_bits > best->prefix_bits ||
            (rule.prefix_bits == best->prefix_bits && rule.port != 0 && best->port == 0))
            best = &rule;
    }
    if (best == nullptr) return std::nullopt;
    return best->policy;
}

ParsedServerRules parse_server_rules(std::string_view text, std::string_view file_name) {
    ParsedServerRules parsed;
    std::vector<ServerRule> rules;
    int number = 0;
    while (!text.empty()) {
        const std::size_t newline = text.find('\n');
        std::string_view line = text.substr(0, newline);
        text = newline == std::string_view::npos ? std::string_view{} : text.substr(newline + 1);
        ++number;
        if (const std::size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
        const std::vector<std::string_view> fields = fields_of(line);
        if (fields.empty()) continue;
        const std::string where = std::string(file_name) + ":" + std::to_string(number) + ": ";
        if (fields.size() != 3) {
            parsed.errors.push_back(where + "expected ADDRESS[/PREFIX] PORT|* VALUE, found " +
                                    std::to_string(fields.size()) + " fields");
            continue;
        }
        ServerRule rule;
        rule.line = number;
        std::string error = read_address(fields[0], rule);
        if (error.empty()) error = read_port(fields[1], rule);
        if (error.empty()) {
            const PolicyValue value = parse_policy_value(fields[2]);
            if (value.ok()) rule.policy = *value.policy;
            else error = "invalid with_rsocket value: \"" + std::string(fields[2]) + "\"";
        }
        if (!error.empty()) {
            parsed.errors.push_back(where + error);
            continue;
        }
        rules.push_back(rule);
    }
    parsed.rules = ServerRules(std::move(rules));
    return parsed;
}

}  // namespace pg_rdma::conninfo
