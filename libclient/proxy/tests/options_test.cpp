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

TEST_CASE("the defaults: PostgreSQL's connection count, 10 s to connect, 30 s to drain, a socket for its owner")
{
    ProxyOptions o;
    REQUIRE(parse_options({"--listen=/tmp", "db"}, every_directory, o).empty());
    CHECK(std::get<UnixListen>(o.listen[0]).path == "/tmp/.s.PGSQL.5432");
    CHECK(o.max_connections == kDefaultMaxConnections);
    CHECK(o.connect_timeout == kDefaultConnectTimeout);
    CHECK(o.drain_timeout == kDefaultDrainTimeout);
    CHECK(o.socket_mode == 0700);
}

TEST_CASE("--socket-mode is octal and keeps the owner's access; --drain-timeout is seconds")
{
    ProxyOptions o;
    REQUIRE(parse_options({"--listen", "/tmp", "--socket-mode", "0770", "--drain-timeout=5", "db"}, every_directory, o)
                .empty());
    CHECK(o.socket_mode == 0770);
    CHECK(o.drain_timeout == std::chrono::seconds(5));
    CHECK_THAT(parse_options({"--listen", "/tmp", "--socket-mode", "0070", "db"}, every_directory, o),
               testing::contains_text("--socket-mode"));
    CHECK_THAT(parse_options({"--listen", "/tmp", "--socket-mode", "999", "db"}, every_directory, o),
               testing::contains_text("--socket-mode"));
    CHECK_THAT(parse_options({"--listen", "/tmp", "--drain-timeout", "0", "db"}, every_directory, o),
               testing::contains_text("--drain-timeout"));
}

TEST_CASE("a command line missing a part or carrying a wrong one is refused, saying which")
{
    ProxyOptions o;
    CHECK_THAT(parse_options({"db"}, no_directory, o), testing::contains_text("--listen"));
    CHECK_THAT(parse_options({"--listen", "6432"}, no_directory, o), testing::contains_text("no SERVER"));
    CHECK_THAT(parse_options({"--listen", "6432", "a", "b"}, no_directory, o), testing::contains_text("one SERVER"));
    CHECK_THAT(parse_options({"--listen"}, no_directory, o), testing::contains_text("needs a value"));
    CHECK_THAT(parse_options({"--listen", "6432", "--max-connections", "0", "db"}, no_directory, o),
               testing::contains_text("--max-connections"));
    CHECK_THAT(parse_options({"--listen", "6432", "--connect-timeout", "-1", "db"}, no_directory, o),
               testing::contains_text("--connect-timeout"));
    CHECK_THAT(parse_options({"--listen", "6432", "--with-rsocket", "true", "db"}, no_directory, o),
               testing::contains_text("unknown option --with-rsocket"));
    CHECK_THAT(parse_options({"--listen", "0.0.0.0:6432", "db"}, no_directory, o), testing::contains_text("loopback"));
    CHECK_THAT(parse_options({"--listen", "6432", "--max-connections", "5001", "db"}, no_directory, o),
               testing::contains_text("1 to 5000"));
    CHECK_THAT(parse_options({"--listen", "/no/such/dir", "db"}, no_directory, o),
               testing::contains_text("not an existing directory"));
}

TEST_CASE("--help is enough on its own")
{
    ProxyOptions o;
    REQUIRE(parse_options({"--help"}, no_directory, o).empty());
    CHECK(o.help);
}
