// The servers file: its lines, and which rule a connection's address meets.
#include "testing/catch.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <fstream>
#include <iterator>
#include <string>

#include "libclient/conninfo/server_rules.hpp"

using namespace pg_rdma::conninfo;

namespace {

sockaddr_in v4(const char* address, std::uint16_t port) {
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(port);
    REQUIRE(inet_pton(AF_INET, address, &in.sin_addr) == 1);
    return in;
}

sockaddr_in6 v6(const char* address, std::uint16_t port) {
    sockaddr_in6 in{};
    in.sin6_family = AF_INET6;
    in.sin6_port = htons(port);
    REQUIRE(inet_pton(AF_INET6, address, &in.sin6_addr) == 1);
    return in;
}

template <typename Addr>
std::optional<RsocketPolicy> match(const ServerRules& rules, const Addr& addr) {
    return rules.match(reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
}

ServerRules parse_clean(const std::string& text) {
    ParsedServerRules parsed = parse_server_rules(text, "servers.conf");
    INFO("errors: " << (parsed.errors.empty() ? std::string() : parsed.errors.front()));
    REQUIRE(parsed.errors.empty());
    return parsed.rules;
}

}  // namespace

TEST_CASE("a rule names an address, a port or any port, and a with_rsocket value") {
    const ServerRules rules = parse_clean("10.0.0.5 5432 require\n10.0.0.6 * true\n");
    CHECK(match(rules, v4("10.0.0.5", 5432)) == RsocketPolicy::Require);
    CHECK(match(rules, v4("10.0.0.5", 5433)) == std::nullopt);
    CHECK(match(rules, v4("10.0.0.6", 6543)) == RsocketPolicy::Prefer);
    CHECK(match(rules, v4("10.0.0.7", 5432)) == std::nullopt);
}

TEST_CASE("the most specific rule wins: longest prefix, then a named port, then the first") {
    const ServerRules rules = parse_clean(
        "10.0.0.0/8 * true\n"
        "10.0.1.0/24 * require\n"
        "10.0.1.9 * false\n"
        "10.0.1.0/24 5433 false\n"
        "10.0.2.0/24 * require\n"
        "10.0.2.0/24 * false\n");
    CHECK(match(rules, v4("10.9.9.9", 5432)) == RsocketPolicy::Prefer);
    CHECK(match(rules, v4("10.0.1.8", 5432)) == RsocketPolicy::Require);
    CHECK(match(rules, v4("10.0.1.8", 5433)) == RsocketPolicy::Off);
    CHECK(match(rules, v4("10.0.1.9", 5432)) == RsocketPolicy::Off);
    CHECK(match(rules, v4("10.0.2.1", 5432)) == RsocketPolicy::Require);
}

TEST_CASE("prefixes that do not end on a byte boundary") {
    const ServerRules rules = parse_clean("192.168.64.0/18 * true\n0.0.0.0/0 5432 require\n");
    CHECK(match(rules, v4("192.168.127.255", 1)) == RsocketPolicy::Prefer);
    CHECK(match(rules, v4("192.168.128.0", 1)) == std::nullopt);
    CHECK(match(rules, v4("8.8.8.8", 5432)) == RsocketPolicy::Require);
}

TEST_CASE("IPv6 rules, and IPv4 reached through an IPv4-mapped IPv6 socket") {
    const ServerRules mapped = parse_clean("::ffff:10.0.0.0/104 * true\n");
    CHECK(match(mapped, v4("10.1.2.3", 5432)) == RsocketPolicy::Prefer);
    CHECK(match(mapped, v6("::ffff:10.1.2.3", 5432)) == RsocketPolicy::Prefer);
    CHECK(match(mapped, v4("11.1.2.3", 5432)) == std::nullopt);
    const ServerRules rules = parse_clean("fd00:1::/64 5432 true\n10.0.0.5 * require\n");
    CHECK(match(rules, v6("fd00:1::17", 5432)) == RsocketPolicy::Prefer);
    CHECK(match(rules, v6("fd00:2::17", 5432)) == std::nullopt);
    CHECK(match(rules, v6("::ffff:10.0.0.5", 5432)) == RsocketPolicy::Require);
    CHECK(match(rules, v4("10.0.0.5", 5432)) == RsocketPolicy::Require);
}

TEST_CASE("comments, blank lines, tabs and CRLF endings are allowed") {
    const ServerRules rules = parse_clean("# servers\n\n\t10.0.0.5\t5432\tyes  # the primary\r\n   \n");
    REQUIRE(rules.rules().size() == 1);
    CHECK(match(rules, v4("10.0.0.5", 5432)) == RsocketPolicy::Prefer);
}

TEST_CASE("a line that cannot be read is reported with its number and left out; the others stand") {
    const ParsedServerRules parsed = parse_server_rules(
        "db.example.com 5432 true\n"
        "10.0.0.5 5432\n"
        "10.0.0.5/33 * true\n"
        "10.0.0.5 99999 true\n"
        "10.0.0.5 5432 maybe\n"
        "10.0.0.6 5432 true\n",
        "/etc/pg_rdma/servers.conf");
    REQUIRE(parsed.errors.size() == 5);
    CHECK(parsed.errors[0].rfind("/etc/pg_rdma/servers.conf:1: \"db.example.com\" is not an IPv4 or IPv6", 0) == 0);
    CHECK(parsed.errors[1] == "/etc/pg_rdma/servers.conf:2: expected ADDRESS[/PREFIX] PORT|* VALUE, found 2 fields");
    CHECK(parsed.errors[2].rfind("/etc/pg_rdma/servers.conf:3: \"33\" is not a prefix length", 0) == 0);
    CHECK(parsed.errors[3].rfind("/etc/pg_rdma/servers.conf:4: \"99999\" is not a port", 0) == 0);
    CHECK(parsed.errors[4] == "/etc/pg_rdma/servers.conf:5: invalid with_rsocket value: \"maybe\"");
    REQUIRE(parsed.rules.rules().size() == 1);
    CHECK(parsed.rules.rules()[0].line == 6);
}

TEST_CASE("no rules match nothing, and other address families match nothing") {
    const ServerRules none;
    CHECK(match(none, v4("10.0.0.5", 5432)) == std::nullopt);
    const ServerRules rules = parse_clean("0.0.0.0/0 * true\n::/0 * true\n");
    sockaddr unix_like{};
    unix_like.sa_family = AF_UNIX;
    CHECK(rules.match(&unix_like, sizeof unix_like) == std::nullopt);
    CHECK(rules.match(nullptr, 0) == std::nullopt);
}

TEST_CASE("the sample servers file (conf/servers.conf) reads without an error") {
    std::ifstream in(PG_RDMA_SERVERS_SAMPLE);
    REQUIRE(in.good());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const ServerRules rules = parse_clean(text);
    REQUIRE(rules.rules().size() == 1);
    CHECK(match(rules, v4("10.99.0.1", 54462)) == RsocketPolicy::Prefer);
    CHECK(match(rules, v4("10.98.0.1", 5432)) == std::nullopt);
}
