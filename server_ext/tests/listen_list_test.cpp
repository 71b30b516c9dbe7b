#include "server_ext/listen_list.hpp"

#include "testing/catch.hpp"

using pg_rdma::server::merged_listen_addresses;
using pg_rdma::server::parse_address_list;

TEST_CASE("pg_rdma.listen_addresses is split on commas and trimmed") {
    const auto list = parse_address_list(" 10.0.0.5 ,fe80::1%eth0,\thost-a ");
    REQUIRE(list.problem.empty());
    REQUIRE(list.items == std::vector<std::string>{"10.0.0.5", "fe80::1%eth0", "host-a"});
}

TEST_CASE("an empty pg_rdma.listen_addresses means none") {
    REQUIRE(parse_address_list("").items.empty());
    REQUIRE(parse_address_list("  ").problem.empty());
}

TEST_CASE("a malformed pg_rdma.listen_addresses is refused with the reason") {
    REQUIRE(parse_address_list("10.0.0.5,,10.0.0.6").problem == "the list has an empty item");
    REQUIRE(parse_address_list("10.0.0.5,").problem == "the list has an empty item");
    REQUIRE(parse_address_list("a b").problem == "\"a b\" is not a host name or address");
}

TEST_CASE("the RDMA addresses are appended to listen_addresses once") {
    REQUIRE(merged_listen_addresses("localhost", {"10.0.0.5"}) == "localhost,10.0.0.5");
    REQUIRE(merged_listen_addresses("localhost, 10.0.0.5", {"10.0.0.5", "10.0.0.6"}) == "localhost,10.0.0.5,10.0.0.6");
    REQUIRE(merged_listen_addresses("LocalHost", {"localhost"}) == "LocalHost");
    REQUIRE(merged_listen_addresses("", {"10.0.0.5"}) == "10.0.0.5");
}

TEST_CASE("a wildcard on either side leaves only the wildcard") {
    REQUIRE(merged_listen_addresses("*", {"10.0.0.5"}) == "*");
    REQUIRE(merged_listen_addresses("localhost", {"*"}) == "*");
}
