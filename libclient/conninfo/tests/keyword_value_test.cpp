// with_rsocket in keyword/value strings, by libpq's lexical rules.
#include "testing/catch.hpp"

#include <string>

#include "libclient/conninfo/keyword_value.hpp"

using namespace pg_rdma::conninfo;

namespace {

Extraction ok(const std::string& conninfo) {
    INFO("conninfo: [" << conninfo << "]");
    Extraction e = extract_from_keyword_value(conninfo);
    REQUIRE(e.status == ExtractStatus::Ok);
    return e;
}

void syntax_error(const std::string& conninfo) {
    INFO("conninfo: [" << conninfo << "]");
    const Extraction e = extract_from_keyword_value(conninfo);
    CHECK(e.status == ExtractStatus::SyntaxError);
    CHECK(e.rewritten == conninfo);
    CHECK_FALSE(e.value.has_value());
}

}  // namespace

TEST_CASE("a string without with_rsocket is returned byte for byte") {
    for (const char* s : {"", "   ", "host=db port=5432", "host = db\tport=5432\n", "dbname='a b' user=x\\ y",
                          "options='-c with_rsocket=true'", "host=a\\ with_rsocket=true", "WITH_RSOCKET=true"}) {
        const Extraction e = ok(s);
        CHECK(e.rewritten == s);
        CHECK_FALSE(e.value.has_value());
        CHECK(e.occurrences == 0);
    }
}

TEST_CASE("with_rsocket is removed first, in the middle, last and alone") {
    CHECK(ok("with_rsocket=true host=db port=5").rewritten == "host=db port=5");
    CHECK(ok("host=db with_rsocket=true port=5").rewritten == "host=db port=5");
    CHECK(ok("host=db port=5 with_rsocket=true").rewritten == "host=db port=5");
    CHECK(ok("with_rsocket=true").rewritten == "");
    CHECK(ok("  with_rsocket=true  ").rewritten == "");
    CHECK(ok("with_rsocket=true").value == "true");
}

TEST_CASE("whitespace around the equals sign belongs to the pair") {
    const Extraction e = ok("host=db with_rsocket \t=\n require port=5");
    CHECK(e.rewritten == "host=db port=5");
    CHECK(e.value == "require");
}

TEST_CASE("whitespace after the equals sign is skipped even when the next pair follows") {
    // libpq reads "with_rsocket= host=db" as with_rsocket = "host=db".
    const Extraction e = ok("with_rsocket= host=db");
    CHECK(e.value == "host=db");
    CHECK(e.rewritten == "");
}

TEST_CASE("quoted values are unquoted and unescaped, and may touch the next pair") {
    CHECK(ok("with_rsocket='true' host=db").value == "true");
    CHECK(ok("with_rsocket='tr\\ue'").value == "true");
    CHECK(ok("with_rsocket='it\\'s'").value == "it's");
    const Extraction touching = ok("host='db'with_rsocket='on'port=5");
    CHECK(touching.rewritten == "host='db'port=5");
    CHECK(touching.value == "on");
}

TEST_CASE("unquoted values end at whitespace and honour backslash escapes") {
    CHECK(ok("with_rsocket=tru\\e host=db").value == "true");
    CHECK(ok("with_rsocket=a\\ b host=db").value == "a b");
    CHECK(ok("with_rsocket=o'n' host=db").value == "o'n'");
    CHECK(ok("with_rsocket=on\\").value == "on");  // a lone trailing backslash is dropped
}

TEST_CASE("an escaped space keeps with_rsocket inside another value") {
    const Extraction e = ok("host=db\\ with_rsocket=true port=5");
    CHECK_FALSE(e.value.has_value());
    CHECK(e.rewritten == "host=db\\ with_rsocket=true port=5");
}

TEST_CASE("neighbours never merge when a pair between them goes") {
    CHECK(ok("host=db with_rsocket='on'port=5").rewritten == "host=db port=5");
    CHECK(ok("host='db' with_rsocket=on port=5").rewritten == "host='db' port=5");
    CHECK(ok("host='db'with_rsocket=on").rewritten == "host='db'");
    CHECK(ok("host=a\\\\ with_rsocket=on port=5").rewritten == "host=a\\\\ port=5");
}

TEST_CASE("the last with_rsocket wins and every occurrence is removed") {
    const Extraction e = ok("with_rsocket=maybe host=db with_rsocket=require");
    CHECK(e.value == "require");
    CHECK(e.occurrences == 2);
    CHECK(e.rewritten == "host=db");
    REQUIRE(e.policy().has_value());
    CHECK(e.policy()->policy == RsocketPolicy::Require);
}

TEST_CASE("an empty with_rsocket value is present, and invalid") {
    for (const char* s : {"host=db with_rsocket=", "with_rsocket='' host=db", "host=db with_rsocket=  "}) {
        const Extraction e = ok(s);
        CHECK(e.value == "");
        CHECK(e.rewritten == "host=db");
        REQUIRE(e.policy().has_value());
        CHECK(e.policy()->error == "invalid with_rsocket value: \"\"\n");
    }
}

TEST_CASE("an invalid value in a keyword/value string reports the keyword in libpq's wording") {
    const Extraction e = ok("host=db with_rsocket=maybe");
    REQUIRE(e.policy().has_value());
    CHECK_FALSE(e.policy()->ok());
    CHECK(e.policy()->error == "invalid with_rsocket value: \"maybe\"\n");
}

TEST_CASE("syntax errors leave the string untouched for libpq to report") {
    syntax_error("host=db with_rsocket");
    syntax_error("with_rsocket=true host");
    syntax_error("with_rsocket='true");
    syntax_error("with_rsocket='true\\'");
    syntax_error("with_rsocket=true host='db");
    syntax_error("host db");
}

TEST_CASE("the string ends at its first NUL, like the C string libpq reads") {
    const std::string s("with_rsocket=on\0 port=5", 23);
    const Extraction e = extract_from_keyword_value(s);
    CHECK(e.value == "on");
    CHECK(e.rewritten == "");
}
