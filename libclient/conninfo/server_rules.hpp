// The servers file: which PostgreSQL servers a client machine reaches over
// RDMA, by address, for every program run under libpq_rdma.so, whatever
// speaks the protocol in it (a driver of its own, or libpq).
//
//   # ADDRESS[/PREFIX]   PORT or *   with_rsocket value
//   10.0.0.5             5432        require
//   10.0.1.0/24          *           true
//   fd00:1::/64          5433        true
//   10.0.1.9             *           false
//
// One rule per line, fields separated by blanks, '#' to the end of a line
// is a comment. ADDRESS is an IPv4 or IPv6 address (no host names: a rule
// is matched against the address a program connects to, and resolving
// names inside a connect() is not something a C library wrapper may do);
// PREFIX defaults to the whole address. The value takes with_rsocket's
// spellings (policy.hpp). An IPv4 address reached through an IPv4-mapped
// IPv6 socket (a Java program's) matches the IPv4 rules.
//
// The most specific rule wins: the longest prefix, then a rule naming the
// port over one with '*'; between equals, the first. A line that cannot be
// read is reported ("FILE:LINE: ...") and left out; the others stand.
// Pure logic: reading the file is the caller's.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "libclient/conninfo/policy.hpp"

namespace pg_rdma::conninfo {

struct ServerRule {
    int family = AF_INET;                 // AF_INET or AF_INET6
    std::array<std::uint8_t, 16> address{};  // network byte order; IPv4 in the first 4
    int prefix_bits = 32;
    std::uint16_t port = 0;               // host byte order; 0: any port
    RsocketPolicy policy = RsocketPolicy::Off;
    int line = 0;
};

class ServerRules {
public:
    ServerRules() = default;
    explicit ServerRules(std::vector<ServerRule> rules) : rules_(std::move(rules)) {}

    // The policy of the most specific rule for `addr` (AF_INET or
    // AF_INET6, port included); nullopt when no rule names it.
    [[nodiscard]] std::optional<RsocketPolicy> match(const sockaddr* addr, socklen_t len) const noexcept;
    [[nodiscard]] bool empty() const noexcept { return rules_.empty(); }
    [[nodiscard]] const std::vector<ServerRule>& rules() const noexcept { return rules_; }

private:
    std::vector<ServerRule> rules_;
};

struct ParsedServerRules {
    ServerRules rules;
    std::vector<std::string> errors;  // "FILE:LINE: what is wrong", one per line left out
};

ParsedServerRules parse_server_rules(std::string_view text, std::string_view file_name);

}  // namespace pg_rdma::conninfo
