// Where a connection's policy comes from: connection > service file > WITH_RSOCKET > off.
#include "testing/catch.hpp"

#include <cstdlib>

#include "libclient/conninfo/precedence.hpp"

using namespace pg_rdma::conninfo;

TEST_CASE("absent everywhere means off, by default") {
    const ResolvedPolicy r = resolve_policy({});
    CHECK(r.ok());
    CHECK(r.policy == RsocketPolicy::Off);
    CHECK(r.source == PolicySource::Default);
    CHECK_FALSE(r.value);
}

TEST_CASE("WITH_RSOCKET alone sets the policy") {
    const ResolvedPolicy r = resolve_policy({std::nullopt, std::nullopt, "true"});
    CHECK(r.policy == RsocketPolicy::Prefer);
    CHECK(r.source == PolicySource::Environment);
}

TEST_CASE("a service-file section wins over WITH_RSOCKET") {
    const ResolvedPolicy r = resolve_policy({std::nullopt, "require", "false"});
    CHECK(r.policy == RsocketPolicy::Require);
    CHECK(r.source == PolicySource::ServiceFile);
}

TEST_CASE("the connection's own with_rsocket wins over the service file and the environment") {
    const ResolvedPolicy r = resolve_policy({"off", "require", "true"});
    CHECK(r.ok());
    CHECK(r.policy == RsocketPolicy::Off);
    CHECK(r.source == PolicySource::Connection);
    CHECK(r.value == "off");  // as written: PQconninfo gives it back
}

TEST_CASE("only the winning value is validated, as libpq does with PGSSLMODE") {
    const ResolvedPolicy r = resolve_policy({"false", "bogus", "maybe"});
    CHECK(r.ok());
    CHECK(r.policy == RsocketPolicy::Off);
}

TEST_CASE("an invalid winning value is an error in libpq's wording, from every source") {
    const ResolvedPolicy env = resolve_policy({std::nullopt, std::nullopt, "maybe"});
    CHECK_FALSE(env.ok());
    CHECK(env.source == PolicySource::Environment);
    CHECK(env.error == "invalid with_rsocket value: \"maybe\"\n");
    const ResolvedPolicy service = resolve_policy({std::nullopt, "sometimes", "true"});
    CHECK(service.error == "invalid with_rsocket value: \"sometimes\"\n");
    const ResolvedPolicy conn = resolve_policy({"perhaps", "true", "true"});
    CHECK(conn.error == "invalid with_rsocket value: \"perhaps\"\n");
    CHECK(conn.policy == RsocketPolicy::Off);
}

TEST_CASE("an empty value is a value at its level, not an absence") {
    const ResolvedPolicy r = resolve_policy({std::nullopt, std::nullopt, ""});
    CHECK_FALSE(r.ok());
    CHECK(r.error == "invalid with_rsocket value: \"\"\n");
    CHECK_FALSE(resolve_policy({"", "true", std::nullopt}).ok());
}

TEST_CASE("environment_value reads WITH_RSOCKET, set or not") {
    ::unsetenv("WITH_RSOCKET");
    CHECK_FALSE(environment_value().has_value());
    ::setenv("WITH_RSOCKET", "require", 1);
    CHECK(environment_value() == "require");
    ::setenv("WITH_RSOCKET", "", 1);
    CHECK(environment_value() == "");
    ::unsetenv("WITH_RSOCKET");
}

TEST_CASE("source names for log lines") {
    CHECK(source_name(PolicySource::Connection) == "connection");
    CHECK(source_name(PolicySource::ServiceFile) == "service file");
    CHECK(source_name(PolicySource::Environment) == "environment");
    CHECK(source_name(PolicySource::Default) == "default");
}
