// with_rsocket in pg_service.conf by libpq 15's reading rules.
#include "testing/catch.hpp"

#include <map>

#include "libclient/conninfo/service_file.hpp"

using namespace pg_rdma::conninfo;

namespace {

const char* const kFile =
    "# the RDMA section\n"
    "\n"
    "[other]\n"
    "with_rsocket=false\n"
    "  [fast]   \n"
    "host=10.0.0.5\n"
    "   # a comment inside\n"
    "\twith_rsocket=require  \n"
    "with_rsocket=true\n"
    "dbname=app\n"
    "[fast_too]\n"
    "with_rsocket=no\n";

FileReader files(std::map<std::string, std::string> contents) {
    return [contents = std::move(contents)](const std::string& path) -> std::optional<std::string> {
        if (auto it = contents.find(path); it != contents.end()) return it->second;
        return std::nullopt;
    };
}

ServiceEnvironment home_only() {
    ServiceEnvironment env;
    env.home = "/home/u";
    env.sysconf_dir = "/etc/pg";
    return env;
}

}  // namespace

TEST_CASE("the named section's first with_rsocket line counts, surrounding whitespace stripped") {
    const SectionLookup fast = find_in_service_text(kFile, "fast");
    CHECK(fast.section_found);
    CHECK(fast.value == "require");
    CHECK(find_in_service_text(kFile, "other").value == "false");
    CHECK(find_in_service_text(kFile, "fast_too").value == "no");
}

TEST_CASE("a section without the keyword is found and gives no value; a missing section is not found") {
    const SectionLookup plain = find_in_service_text("[db]\nhost=x\n", "db");
    CHECK(plain.section_found);
    CHECK_FALSE(plain.value);
    CHECK_FALSE(find_in_service_text(kFile, "nope").section_found);
    CHECK_FALSE(find_in_service_text(kFile, "fas").section_found);  // "[fast]" is not "[fas]"
}

TEST_CASE("a section header matches by its start, as libpq's strncmp does") {
    CHECK(find_in_service_text("[db] trailing words\nwith_rsocket=on\n", "db").value == "on");
}

TEST_CASE("the key is everything before the first '=': a spaced key is not ours, a value keeps its '='") {
    CHECK_FALSE(find_in_service_text("[s]\nwith_rsocket =true\n", "s").value);
    CHECK(find_in_service_text("[s]\nwith_rsocket=a=b\n", "s").value == "a=b");
    CHECK(find_in_service_text("[s]\nwith_rsocket=\n", "s").value == "");
}

TEST_CASE("a file without a final newline, and CRLF line ends, read as libpq reads them") {
    CHECK(find_in_service_text("[s]\r\nwith_rsocket=true\r\n", "s").value == "true");
    CHECK(find_in_service_text("[s]\nwith_rsocket=yes", "s").value == "yes");
}

TEST_CASE("our lines become comments of the same length, everything else is kept byte for byte") {
    const auto hidden = without_keyword_lines(kFile);
    REQUIRE(hidden);
    CHECK(hidden->size() == std::string_view(kFile).size());
    CHECK(*hidden ==
          "# the RDMA section\n"
          "\n"
          "[other]\n"
          "#ith_rsocket=false\n"
          "  [fast]   \n"
          "host=10.0.0.5\n"
          "   # a comment inside\n"
          "\t#ith_rsocket=require  \n"
          "#ith_rsocket=true\n"
          "dbname=app\n"
          "[fast_too]\n"
          "#ith_rsocket=no\n");
    CHECK_FALSE(find_in_service_text(*hidden, "fast").value);
    CHECK_FALSE(without_keyword_lines("[s]\nhost=x\nwith_rsocket =true\n"));
}

TEST_CASE("the user file is PGSERVICEFILE, else ~/.pg_service.conf; the system file is PGSYSCONFDIR's") {
    ServiceEnvironment env = home_only();
    ServiceFiles f = service_files(env);
    CHECK(f.user == "/home/u/.pg_service.conf");
    CHECK_FALSE(f.user_must_exist);
    CHECK(f.system == "/etc/pg/pg_service.conf");
    env.service_file = "/srv/my.conf";
    f = service_files(env);
    CHECK(f.user == "/srv/my.conf");
    CHECK(f.user_must_exist);
    env = {};
    f = service_files(env);
    CHECK_FALSE(f.user);
    CHECK(f.system == std::string(PG_RDMA_LIBPQ_SYSCONFDIR) + "/pg_service.conf");
}

TEST_CASE("the user file's section wins, and the system file is not read when the user file has it") {
    const auto read = files({{"/home/u/.pg_service.conf", "[s]\nhost=a\n"},
                             {"/etc/pg/pg_service.conf", "[s]\nwith_rsocket=true\n[t]\nwith_rsocket=require\n"}});
    CHECK_FALSE(service_value("s", home_only(), read));  // the user's [s] says nothing
    CHECK(service_value("t", home_only(), read) == "require");
}

TEST_CASE("without a user file, or a section in it, the system file is read") {
    CHECK(service_value("s", home_only(), files({{"/etc/pg/pg_service.conf", "[s]\nwith_rsocket=on\n"}})) == "on");
    CHECK_FALSE(service_value("s", home_only(), files({})));
}

TEST_CASE("an unreadable PGSERVICEFILE gives no value (libpq fails the connection itself)") {
    ServiceEnvironment env = home_only();
    env.service_file = "/missing.conf";
    CHECK_FALSE(service_value("s", env, files({{"/etc/pg/pg_service.conf", "[s]\nwith_rsocket=on\n"}})));
}
