// pgrdma doctor's target: every form a DBA writes a server in names the
// same host and port libpq would connect to.
#include "testing/catch.hpp"

#include "libclient/doctor/target.hpp"

using namespace pg_rdma::doctor;

namespace {

Target parsed(const char* text, Defaults defaults = {}) {
    std::string error;
    const auto t = parse_target(text, defaults, error);
    INFO(error);
    REQUIRE(t.has_value());
    return *t;
}

std::string refused(const char* text, Defaults defaults = {}) {
    std::string error;
    CHECK_FALSE(parse_target(text, defaults, error).has_value());
    return error;
}

}  // namespace

TEST_CASE("a host alone gets PGPORT, else 5432") {
    CHECK(parsed("10.0.0.5").address == "10.0.0.5");
    CHECK(parsed("10.0.0.5").port == "5432");
    CHECK(parsed("db1", Defaults{nullptr, nullptr, "5433"}).port == "5433");
}

TEST_CASE("host:port and [ipv6]:port") {
    const Target t = parsed("10.0.0.5:6000");
    CHECK(t.address == "10.0.0.5");
    CHECK(t.port == "6000");
    const Target v6 = parsed("[fd00::5]:6001");
    CHECK(v6.address == "fd00::5");
    CHECK(v6.port == "6001");
    CHECK(parsed("fd00::5").address == "fd00::5");  // a bare IPv6 address has no port
}

TEST_CASE("a conninfo string with with_rsocket, hostaddr and a host list") {
    const Target t = parsed("host=db1,db2 hostaddr=10.0.0.5 port=6002 with_rsocket=require dbname=app");
    CHECK(t.host == "db1");
    CHECK(t.address == "10.0.0.5");
    CHECK(t.port == "6002");
    CHECK(t.more_hosts);
}

TEST_CASE("a URI") {
    const Target t = parsed("postgresql://app@10.0.0.7:6003/app?with_rsocket=true");
    CHECK(t.address == "10.0.0.7");
    CHECK(t.port == "6003");
    CHECK_FALSE(t.more_hosts);
}

TEST_CASE("PGHOST and PGHOSTADDR fill in an empty target") {
    const Target t = parsed("", Defaults{"db9", "10.0.0.9", nullptr});
    CHECK(t.host == "db9");
    CHECK(t.address == "10.0.0.9");
    CHECK(t.port == "5432");
}

TEST_CASE("what cannot be probed is refused with a reason") {
    CHECK(refused("").find("no server given") != std::string::npos);
    CHECK(refused("10.0.0.5:99999").find("not a port") != std::string::npos);
    CHECK(refused("host=/var/run/postgresql").find("Unix-domain socket") != std::string::npos);
    CHECK(refused("[fd00::5").find("lacks its ]") != std::string::npos);
    CHECK_FALSE(refused("host='unterminated").empty());
}
