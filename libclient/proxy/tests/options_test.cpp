// `pgrdma proxy`'s command line: what it takes, and what it refuses.
#include "testing/catch.hpp"

#include "libclient/proxy/options.hpp"

using namespace pg_rdma::proxy;

namespace {

bool no_directory(const std::string&) { return false; }
bool every_directory(const std::string&) { return true; }

}  // namespace

TEST_CASE("listen addresses, the server and the limits are read in any order")
{
    ProxyOptions o;
    REQUIRE(parse_options({"--listen", "/run/pg", "10.0.0.5:6000", "-l", "6432", "--max-connections=7",
                           "--connect-timeout", "3"},
                          every_directory, o)
                .empty());
    CHECK(o.server.host == "10.0.0.5");
    CHECK(o.server.port == 6000);
    REQUIRE(o.listen.size() == 2);
    CHECK(std::get<UnixListen>(o.listen[0]).path == "/run/pg/.s.PGSQL.6000");
    CHECK(std::get<TcpListen>(o.listen[1]).port == 6432);
    CHECK(o.max_connections == 7);
    CHECK(o.connect_timeout == std::chrono::seconds(3));
}

TEST_CASE("the defaults are PostgreSQL's connection count and a 10 s connect timeout")
{
    ProxyOptions o;
    REQUIRE(parse_options({"--listen=/tmp/p.sock", "db"}, no_directory, o).empty());
    CHECK(std::get<UnixListen>(o.listen[0]).path == "/tmp/p.sock");
    CHECK(o.max_connections == kDefaultMaxConnections);
    CHECK(o.connect_timeout == kDefaultConnectTimeout);
}

TEST_CASE("a command line missing a part or carrying a wrong one is refused, saying which")
{
    ProxyOptions o;
    CHECK_THAT(parse_options({"db"}, no_directory, o), Catch::Contains("--listen"));
    CHECK_THAT(parse_options({"--listen", "6432"}, no_directory, o), Catch::Contains("no SERVER"));
    CHECK_THAT(parse_options({"--listen", "6432", "a", "b"}, no_directory, o), Catch::Contains("one SERVER"));
    CHECK_THAT(parse_options({"--listen"}, no_directory, o), Catch::Contains("needs a value"));
    CHECK_THAT(parse_options({"--listen", "6432", "--max-connections", "0", "db"}, no_directory, o),
               Catch::Contains("--max-connections"));
    CHECK_THAT(parse_options({"--listen", "6432", "--connect-timeout", "-1", "db"}, no_directory, o),
               Catch::Contains("--connect-timeout"));
    CHECK_THAT(parse_options({"--listen", "6432", "--with-rsocket", "true", "db"}, no_directory, o),
               Catch::Contains("unknown option --with-rsocket"));
    CHECK_THAT(parse_options({"--listen", "0.0.0.0:6432", "db"}, no_directory, o), Catch::Contains("loopback"));
}

TEST_CASE("--help is enough on its own")
{
    ProxyOptions o;
    REQUIRE(parse_options({"--help"}, no_directory, o).empty());
    CHECK(o.help);
}
