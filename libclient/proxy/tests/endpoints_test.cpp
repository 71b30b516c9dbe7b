// The server and listen addresses `pgrdma proxy` accepts, and those it
// refuses with a reason.
#include "testing/catch.hpp"

#include "libclient/proxy/endpoints.hpp"

using namespace pg_rdma::proxy;

TEST_CASE("a server is HOST, HOST:PORT or [IPV6]:PORT, PostgreSQL's port by default")
{
    ServerEndpoint s;
    REQUIRE(parse_server("db.example", s).empty());
    CHECK(s.host == "db.example");
    CHECK(s.port == 5432);
    REQUIRE(parse_server("10.0.0.5:6543", s).empty());
    CHECK(s.host == "10.0.0.5");
    CHECK(s.port == 6543);
    REQUIRE(parse_server("[fe80::1]:7000", s).empty());
    CHECK(s.host == "fe80::1");
    CHECK(s.port == 7000);
    CHECK(describe(s) == "[fe80::1]:7000");
}

TEST_CASE("a server address that cannot be meant is refused, saying why")
{
    ServerEndpoint s;
    CHECK_THAT(parse_server("", s), testing::contains_text("no host"));
    CHECK_THAT(parse_server(":5432", s), testing::contains_text("no host"));
    CHECK_THAT(parse_server("10.0.0.5:0", s), testing::contains_text("1 to 65535"));
    CHECK_THAT(parse_server("10.0.0.5:65536", s), testing::contains_text("1 to 65535"));
    CHECK_THAT(parse_server("10.0.0.5:54x", s), testing::contains_text("1 to 65535"));
    CHECK_THAT(parse_server("fe80::1", s), testing::contains_text("brackets"));
    CHECK_THAT(parse_server("[fe80::1", s), testing::contains_text("']'"));
    CHECK_THAT(parse_server("[fe80::1]5432", s), testing::contains_text(":PORT"));
}

TEST_CASE("a directory to listen in gets PostgreSQL's socket name for the server's port")
{
    ListenEndpoint l;
    REQUIRE(parse_listen("/run/pgrdma/", 6543, true, l).empty());
    CHECK(std::get<UnixListen>(l).path == "/run/pgrdma/.s.PGSQL.6543");
    CHECK(postgres_socket_path("/", 5432) == "/.s.PGSQL.5432");
}

TEST_CASE("a path that is not an existing directory, or not absolute, is refused")
{
    // (A client finds a Unix socket by directory and port, never by name.)
    ListenEndpoint l;
    CHECK_THAT(parse_listen("/run/pgrdma", 5432, false, l), testing::contains_text("not an existing directory"));
    CHECK_THAT(parse_listen("run/pgrdma", 5432, false, l), testing::contains_text("absolute path"));
    CHECK_THAT(parse_listen("./sockets", 5432, false, l), testing::contains_text("absolute path"));
}

TEST_CASE("a socket path longer than a Unix address holds is refused")
{
    ListenEndpoint l;
    std::string deep = "/" + std::string(120, 'd');
    CHECK_THAT(parse_listen(deep, 5432, true, l), testing::contains_text("longer than"));
}

TEST_CASE("a TCP listen address is a loopback one, 127.0.0.1 by default")
{
    ListenEndpoint l;
    REQUIRE(parse_listen("6432", 5432, false, l).empty());
    CHECK(std::get<TcpListen>(l).host == "127.0.0.1");
    CHECK(std::get<TcpListen>(l).port == 6432);
    REQUIRE(parse_listen("127.0.0.2:6432", 5432, false, l).empty());
    CHECK(std::get<TcpListen>(l).host == "127.0.0.2");
    REQUIRE(parse_listen("[::1]:6432", 5432, false, l).empty());
    CHECK(std::get<TcpListen>(l).host == "::1");
    CHECK(describe(l) == "[::1]:6432");
}

TEST_CASE("the proxy does not listen where other hosts reach it")
{
    ListenEndpoint l;
    CHECK_THAT(parse_listen("0.0.0.0:6432", 5432, false, l), testing::contains_text("loopback"));
    CHECK_THAT(parse_listen("10.0.0.7:6432", 5432, false, l), testing::contains_text("loopback"));
    CHECK_THAT(parse_listen("localhost:6432", 5432, false, l), testing::contains_text("numeric loopback"));
    CHECK_THAT(parse_listen("[::]:6432", 5432, false, l), testing::contains_text("loopback"));
    CHECK_THAT(parse_listen("127.0.0.1", 5432, false, l), testing::contains_text("no port"));
    CHECK_THAT(parse_listen("99999", 5432, false, l), testing::contains_text("1 to 65535"));
}
