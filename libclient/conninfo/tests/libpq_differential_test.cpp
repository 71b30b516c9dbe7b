// Our rewrite against the real libpq 15 (libpq.so.5): for every connection
// string here, libpq must parse our rewritten string to exactly the keywords
// and values it finds in the same string with with_rsocket removed by other
// means, and must reject the original (which is why the rewrite exists).
#include "testing/catch.hpp"

#include <libpq-fe.h>

#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "libclient/conninfo/connection_string.hpp"
#include "libclient/conninfo/keyword_arrays.hpp"
#include "libclient/conninfo/policy.hpp"

using namespace pg_rdma::conninfo;

namespace {

using Options = std::map<std::string, std::string>;

struct Parsed {
    bool ok = false;
    Options options;    // keywords libpq stored a value for
    std::string error;  // libpq's message when !ok
};

Parsed libpq_parse(const std::string& conninfo) {
    Parsed parsed;
    char* error = nullptr;
    PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
    if (options == nullptr) {
        parsed.error = error ? error : "(no message)";
        PQfreemem(error);
        return parsed;
    }
    parsed.ok = true;
    for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o)
        if (o->val != nullptr)
            parsed.options[o->keyword] = o->val;
    PQconninfoFree(options);
    return parsed;
}

std::string rejection_of_with_rsocket(const std::string& conninfo) {
    return is_uri(conninfo) ? "invalid URI query parameter: \"with_rsocket\"\n"
                            : "invalid connection option \"with_rsocket\"\n";
}

// The core check: `original` holds with_rsocket=`value` (or none when value
// is nullopt); `by_hand` is the same connection written without it.
void check_against_libpq(const std::string& original, const std::string& by_hand,
                         const std::optional<std::string>& value) {
    INFO("original: [" << original << "]");
    INFO("by hand:  [" << by_hand << "]");
    const Extraction e = extract_from_connection_string(original);
    INFO("ours:     [" << e.rewritten << "]");
    REQUIRE(e.status == ExtractStatus::Ok);
    CHECK(e.value == value);

    if (value) {
        const Parsed as_given = libpq_parse(original);
        CHECK_FALSE(as_given.ok);
        CHECK(as_given.error == rejection_of_with_rsocket(original));
    } else {
        CHECK(e.rewritten == original);
    }

    const Parsed ours = libpq_parse(e.rewritten);
    const Parsed expected = libpq_parse(by_hand);
    INFO("libpq on ours: " << ours.error << " / on by-hand: " << expected.error);
    REQUIRE(expected.ok);
    REQUIRE(ours.ok);
    CHECK(ours.options == expected.options);
}

struct Case {
    std::string original;
    std::string by_hand;
    std::optional<std::string> value;
};

// --- keyword/value corpus, generated -------------------------------------

struct Piece {
    std::string text;
    bool ends_with_closing_quote;  // the next pair may follow with no whitespace
};

const std::vector<Piece> kKeywordValuePieces = {
    {"host=db1", false},
    {"port = 5433", false},
    {"dbname='my db'", true},
    {"user=a\\ b", false},
    {"options='-c search_path=\\'x y\\''", true},
    {"application_name=app\\\\x", false},
    {"sslmode='require'", true},
    {"connect_timeout=\t10", false},
    {"password=p'w", false},
    {"host='h1,h2'", true},
    {"target_session_attrs=read-write", false},
};

struct RsocketForm {
    Piece piece;
    std::string value;
};

const std::vector<RsocketForm> kKeywordValueForms = {
    {{"with_rsocket=true", false}, "true"},
    {{"with_rsocket = 'on'", true}, "on"},
    {{"with_rsocket='tr\\ue'", true}, "true"},
    {{"with_rsocket=requir\\e", false}, "require"},
    {{"with_rsocket=''", true}, ""},
    {{"with_rsocket=\\'off\\'", false}, "'off'"},
    {{"with_rsocket=\n0", false}, "0"},
};

const std::vector<std::string> kSeparators = {" ", "\t", "\n  ", ""};

std::string join(const std::vector<Piece>& pieces, const std::string& separator, const std::string& lead,
                 const std::string& tail) {
    std::string out = lead;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
        if (i > 0) {
            // No whitespace is allowed only after a closing quote.
            out += (separator.empty() && !pieces[i - 1].ends_with_closing_quote) ? std::string(" ") : separator;
        }
        out += pieces[i].text;
    }
    return out + tail;
}

std::vector<Case> keyword_value_corpus() {
    std::vector<Case> cases;
    const std::size_t n = kKeywordValuePieces.size();
    for (std::size_t start = 0; start < n; ++start) {
        for (std::size_t length = 0; length <= 4; ++length) {
            std::vector<Piece> others;
            for (std::size_t k = 0; k < length; ++k)
                others.push_back(kKeywordValuePieces[(start + k) % n]);
            const std::string by_hand = join(others, " ", "", "");
            for (std::size_t s = 0; s < kSeparators.size(); ++s) {
                const std::string lead = (s % 2) ? "  " : "";
                const std::string tail = (s % 3) ? " \n" : "";
                cases.push_back({join(others, kSeparators[s], lead, tail), by_hand, std::nullopt});
                for (std::size_t f = 0; f < kKeywordValueForms.size(); ++f) {
                    const RsocketForm& form = kKeywordValueForms[(f + start) % kKeywordValueForms.size()];
                    for (std::size_t at = 0; at <= others.size(); ++at) {
                        std::vector<Piece> with = others;
                        with.insert(with.begin() + static_cast<std::ptrdiff_t>(at), form.piece);
                        cases.push_back({join(with, kSeparators[s], lead, tail), by_hand, form.value});
                        // A second, earlier occurrence: the later one wins.
                        const RsocketForm& other = kKeywordValueForms[(f + 1) % kKeywordValueForms.size()];
                        with.insert(with.begin(), other.piece);
                        cases.push_back({join(with, kSeparators[s], lead, tail), by_hand, form.value});
                    }
                }
            }
        }
    }
    return cases;
}

// --- URI corpus, generated -------------------------------------------------

const std::vector<std::string> kAuthorities = {
    "h", "u:p%40ss@h1:5432,h2:5433", "[::1]:5432", "u%3Fx@[fe80::1%25eth0]", "", "h1,", ":5432",
    "with_rsocket@h",
};
const std::vector<std::string> kPaths = {"", "/db", "/my%20db", "/", "/with_rsocket=true"};
const std::vector<std::vector<std::string>> kParameterSets = {
    {},
    {"sslmode=require"},
    {"port=5433", "application_name=a%26b"},
    {"ssl=true", "target_session_attrs=read-write", "connect_timeout=10"},
    {"%70ort=1", "options=-c%20x%3Dy"},
};
const std::vector<std::pair<std::string, std::string>> kUriForms = {
    {"with_rsocket=true", "true"},     {"with%5Frsocket=require", "require"}, {"with_rsocket=%74rue", "true"},
    {"%77ith_rsocket=off", "off"},     {"with_rsocket=", ""},                 {"with_rsocket=a+b%20c", "a+b c"},
};

std::string uri(const std::string& designator, const std::string& authority, const std::string& path,
                const std::vector<std::string>& params, bool trailing_ampersand) {
    std::string out = designator + authority + path;
    for (std::size_t i = 0; i < params.size(); ++i)
        out += (i == 0 ? "?" : "&") + params[i];
    if (trailing_ampersand && !params.empty())
        out += "&";
    return out;
}

std::vector<Case> uri_corpus() {
    std::vector<Case> cases;
    std::size_t turn = 0;
    for (const std::string& authority : kAuthorities) {
        for (const std::string& path : kPaths) {
            for (const auto& params : kParameterSets) {
                for (const bool trailing : {false, true}) {
                    const std::string designator = (turn++ % 2) ? "postgres://" : "postgresql://";
                    const std::string by_hand = uri(designator, authority, path, params, false);
                    cases.push_back({uri(designator, authority, path, params, trailing), by_hand, std::nullopt});
                    for (const auto& [form, value] : kUriForms) {
                        for (std::size_t at = 0; at <= params.size(); ++at) {
                            std::vector<std::string> with = params;
                            with.insert(with.begin() + static_cast<std::ptrdiff_t>(at), form);
                            cases.push_back({uri(designator, authority, path, with, trailing), by_hand, value});
                        }
                    }
                }
            }
        }
    }
    return cases;
}

// A stand-in keyword libpq knows and stores verbatim: put where with_rsocket
// was, it shows what libpq would have done with with_rsocket's value.
constexpr std::string_view kStandIn = "fallback_application_name";

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
    for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
        s.replace(at, from.size(), to);
    return s;
}

bool is_syntax_message(const std::string& message) {
    return message.starts_with("missing \"=\" after") ||
           message == "unterminated quoted string in connection info string\n";
}

}  // namespace

TEST_CASE("libpq 15 rejects with_rsocket in every spelling, so it must be taken out") {
    CHECK(libpq_parse("host=db with_rsocket=true").error == "invalid connection option \"with_rsocket\"\n");
    CHECK(libpq_parse("postgresql://h/db?with_rsocket=true").error ==
          "invalid URI query parameter: \"with_rsocket\"\n");
    CHECK(libpq_parse("postgresql://h/db?with%5Frsocket=true").error ==
          "invalid URI query parameter: \"with_rsocket\"\n");
}

TEST_CASE("hand-written keyword/value strings and URIs parse in libpq as if written without with_rsocket") {
    const std::vector<Case> cases = {
        {"with_rsocket=true", "", "true"},
        {"host=db with_rsocket=require port=5", "host=db port=5", "require"},
        {"host='db'with_rsocket='on'port=5", "host='db' port=5", "on"},
        {"host=db with_rsocket = yes", "host=db", "yes"},
        {"dbname='it\\'s' with_rsocket=o\\n user=a\\\\", "dbname='it\\'s' user=a\\\\", "on"},
        {"host=a\\ with_rsocket=true", "host=a\\ with_rsocket=true", std::nullopt},
        {"options='-c with_rsocket=true' with_rsocket=0", "options='-c with_rsocket=true'", "0"},
        {"with_rsocket=1 with_rsocket=maybe host=h", "host=h", "maybe"},
        {"host=h1,h2 port=5432,5433 with_rsocket=on target_session_attrs=any",
         "host=h1,h2 port=5432,5433 target_session_attrs=any", "on"},
        {"postgresql://h/db?with_rsocket=true", "postgresql://h/db", "true"},
        {"postgresql://u@h1:5432,h2:5433/db?with%5Frsocket=on&sslmode=require",
         "postgresql://u@h1:5432,h2:5433/db?sslmode=require", "on"},
        {"postgres://[::1]:5432/db?port=5&with_rsocket=%74rue", "postgres://[::1]:5432/db?port=5", "true"},
        {"postgresql://u?x@h/db?with_rsocket=on", "postgresql://u?x@h/db", "on"},
        {"postgresql://h/d?b?port=5", "postgresql://h/d?b?port=5", std::nullopt},  // rejected by both alike
    };
    for (const Case& c : cases) {
        if (c.original == "postgresql://h/d?b?port=5") {
            CHECK(extract_from_connection_string(c.original).rewritten == c.original);
            CHECK_FALSE(libpq_parse(c.original).ok);
            continue;
        }
        check_against_libpq(c.original, c.by_hand, c.value);
    }
}

TEST_CASE("generated keyword/value strings: with_rsocket in every position, quoted, escaped, spaced") {
    const std::vector<Case> cases = keyword_value_corpus();
    REQUIRE(cases.size() > 1000);
    for (const Case& c : cases)
        check_against_libpq(c.original, c.by_hand, c.value);
}

TEST_CASE("generated URIs: multi-host, IPv6, percent-encoding, with_rsocket in every position") {
    const std::vector<Case> cases = uri_corpus();
    REQUIRE(cases.size() > 1000);
    for (const Case& c : cases)
        check_against_libpq(c.original, c.by_hand, c.value);
}

TEST_CASE("random keyword/value strings: our scanner agrees with libpq's byte for byte") {
    // Strings of random tokens. with_rsocket is replaced by a keyword libpq
    // knows (in both strings alike, values included) so libpq can tell us
    // what it would have done; nothing in the replacement is lexically special.
    const std::vector<std::string> tokens = {"host", "port", "with_rsocket", "=", "=", " ", " ", "\t", "'", "'",
                                             "\\", "a", "on", "x y", "\\'", "\\\\"};
    std::mt19937 random(20240611);
    std::uniform_int_distribution<std::size_t> pick(0, tokens.size() - 1);
    std::uniform_int_distribution<int> length(0, 14);
    std::size_t parsed_ok = 0, syntax_errors = 0;
    for (int round = 0; round < 40000; ++round) {
        std::string original;
        for (int k = length(random); k > 0; --k)
            original += tokens[pick(random)];
        INFO("original: [" << original << "]");
        const Extraction e = extract_from_connection_string(original);
        const Parsed truth = libpq_parse(replace_all(original, kKeyword, kStandIn));
        if (truth.ok) {
            ++parsed_ok;
            REQUIRE(e.status == ExtractStatus::Ok);
            Options expected = truth.options;
            std::optional<std::string> value;
            if (auto it = expected.find(std::string(kStandIn)); it != expected.end()) {
                value = it->second;
                expected.erase(it);
            }
            CHECK((e.value ? std::optional(replace_all(*e.value, kKeyword, kStandIn)) : std::nullopt) == value);
            const Parsed ours = libpq_parse(replace_all(e.rewritten, kKeyword, kStandIn));
            INFO("ours: [" << e.rewritten << "] " << ours.error);
            REQUIRE(ours.ok);
            CHECK(ours.options == expected);
        } else if (is_syntax_message(truth.error)) {
            ++syntax_errors;
            CHECK(e.status == ExtractStatus::SyntaxError);
            CHECK(e.rewritten == original);
        } else if (e.status == ExtractStatus::Ok) {
            // An unknown keyword such as "hosta": libpq must still fail on our string, the same way.
            CHECK(libpq_parse(replace_all(e.rewritten, kKeyword, kStandIn)).error == truth.error);
        }
    }
    CHECK(parsed_ok > 1000);
    CHECK(syntax_errors > 1000);
}

TEST_CASE("random URI queries: our query parser agrees with libpq's") {
    // Parameters built from parts, each with_rsocket spelling paired with the
    // stand-in keyword so libpq shows what it would have stored.
    struct Key {
        std::string spelling;
        bool is_rsocket;
    };
    const std::vector<Key> keys = {{"port", false},          {"sslmode", false},          {"with_rsocket", true},
                                   {"with%5Frsocket", true}, {"%77ith_rsocket", true},     {"", false},
                                   {"bad%zz", false},        {"with_rsocket%", true}};
    const std::vector<std::string> values = {"1", "true", "%74rue", "", "%", "%00", "x%2", "a=b", "on%20"};
    const std::vector<std::string> heads = {"postgresql://h/db", "postgres://u@h1,h2:5/db", "postgresql://[::1]",
                                            "postgresql://", "postgresql://[::1/db", "postgresql://h/d?"};
    std::mt19937 random(7);
    std::uniform_int_distribution<std::size_t> pick_key(0, keys.size() - 1), pick_value(0, values.size() - 1),
        pick_head(0, heads.size() - 1);
    std::uniform_int_distribution<int> count(0, 4), coin(0, 5);
    std::size_t parsed_ok = 0, rejected = 0;
    for (int round = 0; round < 20000; ++round) {
        std::string original = heads[pick_head(random)], stand_in = original;
        for (int k = count(random), i = 0; i < k; ++i) {
            const Key& key = keys[pick_key(random)];
            const std::string separator = i == 0 ? "?" : (coin(random) == 0 ? "&&" : "&");
            std::string param = key.spelling + (coin(random) == 0 ? "" : "=" + values[pick_value(random)]);
            original += separator + param;
            stand_in += separator + (key.is_rsocket && key.spelling != "with_rsocket%"
                                         ? std::string(kStandIn) + param.substr(key.spelling.size())
                                         : param);
        }
        if (coin(random) == 0) {
            original += "&";
            stand_in += "&";
        }
        INFO("original: [" << original << "]  stand-in: [" << stand_in << "]");
        const Extraction e = extract_from_connection_string(original);
        const Parsed truth = libpq_parse(stand_in);
        if (truth.ok) {
            ++parsed_ok;
            REQUIRE(e.status == ExtractStatus::Ok);
            Options expected = truth.options;
            std::optional<std::string> value;
            if (auto it = expected.find(std::string(kStandIn)); it != expected.end()) {
                value = it->second;
                expected.erase(it);
            }
            CHECK(e.value == value);
            const Parsed ours = libpq_parse(e.rewritten);
            INFO("ours: [" << e.rewritten << "] " << ours.error);
            REQUIRE(ours.ok);
            CHECK(ours.options == expected);
        } else {
            ++rejected;
            // Either we leave it untouched, or libpq rejects our string too.
            if (e.status == ExtractStatus::Ok && e.occurrences > 0)
                CHECK_FALSE(libpq_parse(e.rewritten).ok);
            if (e.status == ExtractStatus::SyntaxError)
                CHECK(e.rewritten == original);
        }
    }
    CHECK(parsed_ok > 1000);
    CHECK(rejected > 1000);
}

TEST_CASE("strings libpq cannot parse are handed back untouched, and libpq gives its own reason") {
    // (A syntax error after a with_rsocket pair would be reported by libpq 15
    // as the unknown with_rsocket, since it stores pairs as it reads them;
    // these errors come first.)
    for (const char* s : {"host=db with_rsocket", "with_rsocket='true", "host with_rsocket=on",
                          "postgresql://h/db?with_rsocket", "postgresql://h/db?with_rsocket=on=off",
                          "postgresql://h/db?with_rsocket=%zz", "postgresql://h/db?port=5&&with_rsocket=on",
                          "postgresql://[::1/db?with_rsocket=on", "postgresql://[]/db?with_rsocket=on"}) {
        INFO("string: [" << s << "]");
        const Extraction e = extract_from_connection_string(s);
        CHECK(e.status == ExtractStatus::SyntaxError);
        CHECK(e.rewritten == s);
        const Parsed parsed = libpq_parse(s);
        CHECK_FALSE(parsed.ok);
        CHECK(parsed.error != rejection_of_with_rsocket(s));
    }
}

namespace {

// What libpq 15 made of keyword arrays: PQconnectStartParams then PQconninfo.
// The host is a Unix socket directory that does not exist, so the attempt
// fails at once without any network.
Parsed libpq_arrays(const std::vector<const char*>& keywords, const std::vector<const char*>& values,
                    bool expand) {
    Parsed parsed;
    PGconn* conn = PQconnectStartParams(keywords.data(), values.data(), expand ? 1 : 0);
    REQUIRE(conn != nullptr);
    const std::string message = PQerrorMessage(conn);
    if (message.starts_with("invalid ") || message.find("connection info string") != std::string::npos) {
        parsed.error = message;
    } else {
        parsed.ok = true;
        PQconninfoOption* options = PQconninfo(conn);
        for (const PQconninfoOption* o = options; o && o->keyword != nullptr; ++o)
            if (o->val != nullptr)
                parsed.options[o->keyword] = o->val;
        PQconninfoFree(options);
    }
    PQfinish(conn);
    return parsed;
}

constexpr const char* kNoSuchSocketDir = "/nonexistent-pg-rdma-conninfo-test";

struct ArraysCase {
    std::vector<const char*> keywords, values;  // without the terminating NULLs
    std::vector<const char*> by_hand_keywords, by_hand_values;
    std::optional<std::string> value;
};

}  // namespace

TEST_CASE("keyword arrays, expand_dbname included, reach libpq as if written without with_rsocket") {
    const std::vector<ArraysCase> cases = {
        {{"host", "with_rsocket", "dbname"}, {kNoSuchSocketDir, "true", "app"},
         {"host", "dbname"}, {kNoSuchSocketDir, "app"}, "true"},
        {{"host", "dbname"}, {kNoSuchSocketDir, "dbname=app with_rsocket=on port=5433"},
         {"host", "dbname"}, {kNoSuchSocketDir, "dbname=app port=5433"}, "on"},
        {{"port", "host", "dbname", "port"}, {"1", kNoSuchSocketDir, "port=7 with_rsocket=1", "9"},
         {"port", "host", "dbname", "port"}, {"1", kNoSuchSocketDir, "port=7", "9"}, "1"},
        {{"host", "dbname"}, {kNoSuchSocketDir, "with_rsocket=require"},
         {"host"}, {kNoSuchSocketDir}, "require"},
        {{"host", "dbname", "dbname"}, {kNoSuchSocketDir, "with_rsocket=on user=u", "port=7"},
         {"host", "dbname", "dbname"}, {kNoSuchSocketDir, "user=u", "port=7"}, "on"},  // a later dbname stays a name
        {{"host", "dbname"}, {kNoSuchSocketDir, "postgresql:///app?with_rsocket=on&port=5433"},
         {"host", "dbname"}, {kNoSuchSocketDir, "postgresql:///app?port=5433"}, "on"},
        {{"host", "dbname", "dbname"}, {kNoSuchSocketDir, nullptr, "sslmode=disable with_rsocket=off"},
         {"host", "dbname", "dbname"}, {kNoSuchSocketDir, nullptr, "sslmode=disable"}, "off"},
        {{"with_rsocket", "host", "with_rsocket"}, {"on", kNoSuchSocketDir, ""},
         {"host"}, {kNoSuchSocketDir}, "on"},
    };
    for (const ArraysCase& c : cases) {
        std::vector<const char*> keywords = c.keywords, values = c.values;
        std::vector<const char*> hand_keywords = c.by_hand_keywords, hand_values = c.by_hand_values;
        for (auto* v : {&keywords, &values, &hand_keywords, &hand_values})
            v->push_back(nullptr);
        std::string shown;
        for (std::size_t i = 0; keywords[i]; ++i)
            shown += std::string(keywords[i]) + "=" + (values[i] ? values[i] : "NULL") + "; ";
        INFO("arrays: " << shown);

        const ArraysExtraction e = extract_from_keyword_arrays(keywords.data(), values.data(), true);
        REQUIRE(e.status == ExtractStatus::Ok);
        CHECK(e.value == c.value);

        const Parsed as_given = libpq_arrays(keywords, values, true);
        CHECK_FALSE(as_given.ok);
        CHECK(as_given.error.find("with_rsocket") != std::string::npos);

        std::vector<const char*> ours_keywords(e.arrays.keywords(), e.arrays.keywords() + e.arrays.size() + 1);
        std::vector<const char*> ours_values(e.arrays.values(), e.arrays.values() + e.arrays.size() + 1);
        const Parsed ours = libpq_arrays(ours_keywords, ours_values, true);
        const Parsed expected = libpq_arrays(hand_keywords, hand_values, true);
        INFO("libpq on ours: " << ours.error << " / by hand: " << expected.error);
        REQUIRE(expected.ok);
        REQUIRE(ours.ok);
        CHECK(ours.options == expected.options);
    }
}

TEST_CASE("our invalid-value message has the shape libpq 15 gives sslmode and target_session_attrs") {
    for (const std::string value : {"maybe", "", "o", "x y"}) {
        for (const std::string keyword : {"sslmode", "target_session_attrs"}) {
            const std::string conninfo = "host=" + std::string(kNoSuchSocketDir) + " " + keyword + "='" + value + "'";
            PGconn* conn = PQconnectStart(conninfo.c_str());
            REQUIRE(conn != nullptr);
            std::string libpq_message = PQerrorMessage(conn);
            PQfinish(conn);
            libpq_message.replace(libpq_message.find(keyword), keyword.size(), kKeyword);
            CHECK(invalid_value_message(value) == libpq_message);
        }
    }
}
