// with_rsocket in PQconnectdbParams keyword arrays, expand_dbname included.
#include "testing/catch.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "libclient/conninfo/keyword_arrays.hpp"

using namespace pg_rdma::conninfo;

namespace {

using Entry = std::pair<std::string, std::optional<std::string>>;

// NULL-terminated arrays over `entries`, as an application would pass them.
struct Input {
    explicit Input(const std::vector<Entry>& entries) {
        for (const Entry& e : entries) {
            keywords.push_back(e.first.c_str());
            values.push_back(e.second ? e.second->c_str() : nullptr);
        }
        keywords.push_back(nullptr);
        values.push_back(nullptr);
    }
    std::vector<const char*> keywords;
    std::vector<const char*> values;
};

ArraysExtraction extract(const std::vector<Entry>& entries, bool expand) {
    const Input in(entries);
    return extract_from_keyword_arrays(in.keywords.data(), in.values.data(), expand);
}

std::vector<Entry> entries_of(const KeywordArrays& arrays) {
    std::vector<Entry> out;
    for (std::size_t i = 0; i < arrays.size(); ++i) {
        const char* v = arrays.values()[i];
        out.emplace_back(arrays.keywords()[i], v ? std::optional<std::string>(v) : std::nullopt);
    }
    CHECK(arrays.keywords()[arrays.size()] == nullptr);
    CHECK(arrays.values()[arrays.size()] == nullptr);
    return out;
}

}  // namespace

TEST_CASE("the with_rsocket entry is removed and the others kept in order, NULL values too") {
    const ArraysExtraction e = extract({{"host", "db"}, {"with_rsocket", "true"}, {"port", std::nullopt},
                                        {"dbname", "app"}}, false);
    REQUIRE(e.status == ExtractStatus::Ok);
    CHECK(e.value == "true");
    CHECK(e.occurrences == 1);
    CHECK(entries_of(e.arrays) == std::vector<Entry>{{"host", "db"}, {"port", std::nullopt}, {"dbname", "app"}});
}

TEST_CASE("arrays without with_rsocket come back equal") {
    const ArraysExtraction e = extract({{"host", "db"}, {"dbname", "app"}}, true);
    CHECK_FALSE(e.value.has_value());
    CHECK(e.occurrences == 0);
    CHECK(entries_of(e.arrays) == std::vector<Entry>{{"host", "db"}, {"dbname", "app"}});
}

TEST_CASE("a NULL or empty with_rsocket entry sets nothing, as libpq skips such entries") {
    const ArraysExtraction e = extract({{"with_rsocket", "require"}, {"with_rsocket", ""},
                                        {"with_rsocket", std::nullopt}, {"host", "db"}}, false);
    CHECK(e.value == "require");
    CHECK(e.occurrences == 3);
    CHECK(entries_of(e.arrays) == std::vector<Entry>{{"host", "db"}});
    CHECK_FALSE(extract({{"with_rsocket", ""}}, false).value.has_value());
}

TEST_CASE("among array entries the last with_rsocket wins") {
    CHECK(extract({{"with_rsocket", "maybe"}, {"with_rsocket", "off"}}, false).value == "off");
}

TEST_CASE("with expand_dbname, with_rsocket inside a conninfo dbname is taken out") {
    const ArraysExtraction e = extract({{"host", "db"}, {"dbname", "dbname=app with_rsocket=require port=5"}}, true);
    CHECK(e.value == "require");
    CHECK(e.occurrences == 1);
    CHECK(entries_of(e.arrays) == std::vector<Entry>{{"host", "db"}, {"dbname", "dbname=app port=5"}});
}

TEST_CASE("with expand_dbname, with_rsocket inside a URI dbname is taken out") {
    const ArraysExtraction e = extract({{"dbname", "postgresql://h/app?with%5Frsocket=on&port=5"}}, true);
    CHECK(e.value == "on");
    CHECK(entries_of(e.arrays) == std::vector<Entry>{{"dbname", "postgresql://h/app?port=5"}});
}

TEST_CASE("a dbname that held only with_rsocket becomes empty, which libpq skips") {
    const ArraysExtraction e = extract({{"dbname", " with_rsocket=on "}, {"host", "db"}}, true);
    CHECK(e.value == "on");
    CHECK(entries_of(e.arrays) == std::vector<Entry>{{"dbname", ""}, {"host", "db"}});
}

TEST_CASE("the expanded dbname applies at its place in the order of entries") {
    // before the dbname: overridden by it
    CHECK(extract({{"with_rsocket", "off"}, {"dbname", "with_rsocket=require"}}, true).value == "require");
    // after the dbname: overrides it
    CHECK(extract({{"dbname", "with_rsocket=require"}, {"with_rsocket", "off"}}, true).value == "off");
    // an empty entry after it overrides nothing
    CHECK(extract({{"dbname", "with_rsocket=require"}, {"with_rsocket", ""}}, true).value == "require");
    // an empty value inside the dbname string is a value (libpq copies it)
    CHECK(extract({{"with_rsocket", "on"}, {"dbname", "with_rsocket='' port=5"}}, true).value == "");
}

TEST_CASE("without expand_dbname a dbname is a plain name, never looked into") {
    const ArraysExtraction e = extract({{"dbname", "with_rsocket=on"}}, false);
    CHECK_FALSE(e.value.has_value());
    CHECK(entries_of(e.arrays) == std::vector<Entry>{{"dbname", "with_rsocket=on"}});
}

TEST_CASE("only the first non-NULL dbname is expanded, and only if it holds '=' or a URI prefix") {
    // NULL dbname entries are passed over: the next one is the first
    CHECK(extract({{"dbname", std::nullopt}, {"dbname", "with_rsocket=on"}}, true).value == "on");
    // an empty first dbname is not a connection string: nothing is expanded
    CHECK_FALSE(extract({{"dbname", ""}, {"dbname", "with_rsocket=on"}}, true).value.has_value());
    // a plain first dbname: the second is a plain name too
    const ArraysExtraction plain = extract({{"dbname", "app"}, {"dbname", "with_rsocket=on"}}, true);
    CHECK_FALSE(plain.value.has_value());
    CHECK(entries_of(plain.arrays) == std::vector<Entry>{{"dbname", "app"}, {"dbname", "with_rsocket=on"}});
    // a name with neither '=' nor a URI prefix stays a name
    CHECK_FALSE(extract({{"dbname", "postgresql:with_rsocket"}}, true).value.has_value());
}

TEST_CASE("a malformed dbname connection string leaves the arrays unchanged for libpq to report") {
    const ArraysExtraction e = extract({{"with_rsocket", "on"}, {"dbname", "port='5"}}, true);
    CHECK(e.status == ExtractStatus::SyntaxError);
    CHECK_FALSE(e.value.has_value());
    CHECK(entries_of(e.arrays) == std::vector<Entry>{{"with_rsocket", "on"}, {"dbname", "port='5"}});
}

TEST_CASE("an invalid value in keyword arrays reports the keyword in libpq's wording") {
    const ArraysExtraction e = extract({{"with_rsocket", "maybe"}}, false);
    REQUIRE(e.policy().has_value());
    CHECK(e.policy()->error == "invalid with_rsocket value: \"maybe\"\n");
    const ArraysExtraction in_dbname = extract({{"dbname", "with_rsocket=perhaps"}}, true);
    REQUIRE(in_dbname.policy().has_value());
    CHECK(in_dbname.policy()->error == "invalid with_rsocket value: \"perhaps\"\n");
}

TEST_CASE("the arrays handed out stay valid after the result is moved") {
    ArraysExtraction e = extract({{"host", "a"}, {"port", "5"}, {"with_rsocket", "on"}, {"dbname", "x"}}, false);
    const ArraysExtraction moved = std::move(e);
    CHECK(entries_of(moved.arrays) == std::vector<Entry>{{"host", "a"}, {"port", "5"}, {"dbname", "x"}});
}
