// The value spellings of with_rsocket: the backend's parse_bool() plus require.
#include "testing/catch.hpp"

#include <string>

#include "libclient/conninfo/policy.hpp"

using namespace pg_rdma::conninfo;

namespace {

RsocketPolicy valid(const std::string& value) {
    INFO("value: \"" << value << "\"");
    const PolicyValue parsed = parse_policy_value(value);
    REQUIRE(parsed.ok());
    REQUIRE(parsed.error.empty());
    return *parsed.policy;
}

std::string invalid(const std::string& value) {
    INFO("value: \"" << value << "\"");
    const PolicyValue parsed = parse_policy_value(value);
    REQUIRE_FALSE(parsed.ok());
    return parsed.error;
}

}  // namespace

TEST_CASE("true, yes, on, 1 and their unique prefixes ask for RDMA with fallback") {
    for (const char* v : {"true", "TRUE", "True", "tRuE", "t", "T", "tr", "tru", "yes", "YES", "y", "ye",
                          "on", "ON", "oN", "1"})
        CHECK(valid(v) == RsocketPolicy::Prefer);
}

TEST_CASE("false, no, off, 0 and their unique prefixes mean plain libpq") {
    for (const char* v : {"false", "FALSE", "f", "F", "fa", "fal", "fals", "no", "NO", "n", "off", "OFF",
                          "Of", "of", "0"})
        CHECK(valid(v) == RsocketPolicy::Off);
}

TEST_CASE("require in any letter case asks for RDMA or failure") {
    for (const char* v : {"require", "REQUIRE", "Require", "rEqUiRe"})
        CHECK(valid(v) == RsocketPolicy::Require);
}

TEST_CASE("values parse_bool refuses are invalid: o, overlong words, numbers other than 0 and 1") {
    for (const char* v : {"o", "O", "truex", "yess", "noo", "onn", "offf", "falsey", "10", "01", "2", "-1",
                          "maybe", "prefer", "disable"})
        CHECK_FALSE(parse_policy_value(v).ok());
}

TEST_CASE("prefixes and extensions of require are not require") {
    for (const char* v : {"r", "req", "requir", "requires", "required"})
        CHECK_FALSE(parse_policy_value(v).ok());
}

TEST_CASE("surrounding whitespace is not trimmed and the empty value is invalid, as in libpq") {
    for (const char* v : {"", " true", "true ", " ", "\ton"})
        CHECK_FALSE(parse_policy_value(v).ok());
}

TEST_CASE("an invalid value is reported in libpq's wording, naming with_rsocket") {
    CHECK(invalid("maybe") == "invalid with_rsocket value: \"maybe\"\n");
    CHECK(invalid("") == "invalid with_rsocket value: \"\"\n");
    CHECK(invalid("o") == "invalid with_rsocket value: \"o\"\n");
    CHECK(invalid_value_message("x y") == "invalid with_rsocket value: \"x y\"\n");
}

TEST_CASE("parse_pg_bool follows the backend's parse_bool word by word") {
    CHECK(parse_pg_bool("on") == true);
    CHECK(parse_pg_bool("of") == false);
    CHECK(parse_pg_bool("off") == false);
    CHECK(parse_pg_bool("o") == std::nullopt);
    CHECK(parse_pg_bool("Y") == true);
    CHECK(parse_pg_bool("N") == false);
    CHECK(parse_pg_bool("require") == std::nullopt);
}

TEST_CASE("policy names for log lines") {
    CHECK(policy_name(RsocketPolicy::Off) == "off");
    CHECK(policy_name(RsocketPolicy::Prefer) == "prefer");
    CHECK(policy_name(RsocketPolicy::Require) == "require");
}
