// with_rsocket as a URI query parameter, by libpq's URI rules.
#include "testing/catch.hpp"

#include <string>

#include "libclient/conninfo/uri.hpp"

using namespace pg_rdma::conninfo;

namespace {

Extraction ok(const std::string& uri) {
    INFO("uri: [" << uri << "]");
    Extraction e = extract_from_uri(uri);
    REQUIRE(e.status == ExtractStatus::Ok);
    return e;
}

void syntax_error(const std::string& uri) {
    INFO("uri: [" << uri << "]");
    const Extraction e = extract_from_uri(uri);
    CHECK(e.status == ExtractStatus::SyntaxError);
    CHECK(e.rewritten == uri);
    CHECK_FALSE(e.value.has_value());
}

}  // namespace

TEST_CASE("both URI designators are recognised, case-sensitively") {
    CHECK(uri_prefix_length("postgresql://h") == 13);
    CHECK(uri_prefix_length("postgres://h") == 11);
    CHECK(uri_prefix_length("POSTGRESQL://h") == 0);
    CHECK(uri_prefix_length(" postgresql://h") == 0);
    CHECK(ok("postgres://h/db?with_rsocket=on").rewritten == "postgres://h/db");
}

TEST_CASE("a URI without with_rsocket is returned byte for byte") {
    for (const char* s : {"postgresql://", "postgresql://h", "postgresql://h/db?", "postgresql://h/db?port=5&",
                          "postgresql://u:p@h1:1,h2:2/db?sslmode=require", "postgresql://h/with_rsocket=true",
                          "postgresql://with_rsocket@h/db?port=5"}) {
        const Extraction e = ok(s);
        CHECK(e.rewritten == s);
        CHECK_FALSE(e.value.has_value());
    }
}

TEST_CASE("with_rsocket as the only parameter takes the question mark with it") {
    CHECK(ok("postgresql://h/db?with_rsocket=true").rewritten == "postgresql://h/db");
    CHECK(ok("postgresql://h?with_rsocket=true").rewritten == "postgresql://h");
    CHECK(ok("postgresql://?with_rsocket=true").rewritten == "postgresql://");
    CHECK(ok("postgresql://h/db?with_rsocket=true&").rewritten == "postgresql://h/db");
}

TEST_CASE("with_rsocket is removed first, in the middle and last, other parameters kept as written") {
    CHECK(ok("postgresql://h/db?with_rsocket=true&sslmode=require&port=5").rewritten ==
          "postgresql://h/db?sslmode=require&port=5");
    CHECK(ok("postgresql://h/db?sslmode=require&with_rsocket=true&port=5").rewritten ==
          "postgresql://h/db?sslmode=require&port=5");
    CHECK(ok("postgresql://h/db?sslmode=require&port=5&with_rsocket=true").rewritten ==
          "postgresql://h/db?sslmode=require&port=5");
    CHECK(ok("postgresql://h/db?application_name=a%26b&with_rsocket=1&").rewritten ==
          "postgresql://h/db?application_name=a%26b&");
}

TEST_CASE("percent-encoded keyword and value are decoded before matching") {
    const Extraction key = ok("postgresql://h/db?with%5Frsocket=true&port=5");
    CHECK(key.value == "true");
    CHECK(key.rewritten == "postgresql://h/db?port=5");
    CHECK(ok("postgresql://h/db?with_rsocket=%74rue").value == "true");
    CHECK(ok("postgresql://h/db?%77%69%74%68%5f%72%73%6F%63%6B%65%74=%52equire").value == "Require");
    CHECK(ok("postgresql://h/db?with_rsocket=a+b").value == "a+b");  // '+' is not a space in libpq
}

TEST_CASE("the host part is kept byte for byte, multi-host and IPv6 included") {
    CHECK(ok("postgresql://u:p%40ss@h1:5432,h2:5433,[::1]:5434/my%20db?with_rsocket=on&target_session_attrs=any")
              .rewritten == "postgresql://u:p%40ss@h1:5432,h2:5433,[::1]:5434/my%20db?target_session_attrs=any");
    CHECK(ok("postgresql://[fe80::1%25eth0]:5432?with_rsocket=on").rewritten == "postgresql://[fe80::1%25eth0]:5432");
    CHECK(ok("postgresql://h1,h2?with_rsocket=on").rewritten == "postgresql://h1,h2");
}

TEST_CASE("a question mark before the host part does not start the query") {
    // libpq: credentials end at the first '@' before any '/', so "u?x" is a user name.
    const Extraction user = ok("postgresql://u?x@h/db?with_rsocket=on&port=5");
    CHECK(user.rewritten == "postgresql://u?x@h/db?port=5");
    CHECK(user.value == "on");
    // Inside IPv6 brackets too (libpq scans to ']').
    CHECK(ok("postgresql://[a?b]/db?with_rsocket=on").rewritten == "postgresql://[a?b]/db");
}

TEST_CASE("a question mark inside the query is part of a parameter") {
    const Extraction e = ok("postgresql://h/d?b?with_rsocket=on");
    CHECK_FALSE(e.value.has_value());  // libpq sees the parameter "b?with_rsocket"
    CHECK(e.rewritten == "postgresql://h/d?b?with_rsocket=on");
}

TEST_CASE("the last with_rsocket parameter wins") {
    const Extraction e = ok("postgresql://h/db?with_rsocket=maybe&port=5&with%5frsocket=off");
    CHECK(e.value == "off");
    CHECK(e.occurrences == 2);
    CHECK(e.rewritten == "postgresql://h/db?port=5");
}

TEST_CASE("an invalid value in a URI reports the keyword in libpq's wording") {
    const Extraction e = ok("postgresql://h/db?with_rsocket=ma%79be");
    REQUIRE(e.policy().has_value());
    CHECK(e.policy()->error == "invalid with_rsocket value: \"maybe\"\n");
}

TEST_CASE("malformed queries and host parts leave the URI untouched for libpq to report") {
    syntax_error("postgresql://h/db?with_rsocket");
    syntax_error("postgresql://h/db?with_rsocket=a=b");
    syntax_error("postgresql://h/db?with_rsocket=on&&port=5");
    syntax_error("postgresql://h/db?&with_rsocket=on");
    syntax_error("postgresql://h/db?with_rsocket=%zz");
    syntax_error("postgresql://h/db?with_rsocket=on%");
    syntax_error("postgresql://h/db?with_rsocket=%00");
    syntax_error("postgresql://h/db?with%5rsocket=on");
    syntax_error("postgresql://[::1/db?with_rsocket=on");
    syntax_error("postgresql://[]/db?with_rsocket=on");
    syntax_error("postgresql://[::1]x/db?with_rsocket=on");
}

TEST_CASE("uri_decode follows libpq's percent-decoding") {
    CHECK(uri_decode("a%41%62") == "aAb");
    CHECK(uri_decode("%7e") == "~");
    CHECK(uri_decode("%") == std::nullopt);
    CHECK(uri_decode("%4") == std::nullopt);
    CHECK(uri_decode("%g1") == std::nullopt);
    CHECK(uri_decode("%00") == std::nullopt);
}
