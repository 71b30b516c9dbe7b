#include "libclient/preload/conninfo_options.hpp"

#include <cstdlib>
#include <cstring>

#include "libclient/conninfo/connection_string.hpp"
#include "libclient/conninfo/policy.hpp"
#include "libclient/preload/libpq_calls.hpp"

namespace pg_rdma::client {
namespace {

// Static, as libpq's own keyword and label strings are: PQconninfoFree
// never frees them.
constexpr char kKeywordText[] = "with_rsocket";
static_assert(conninfo::kKeyword == kKeywordText);
constexpr const char* kEnvvar = conninfo::kEnvironmentVariable;
constexpr char kLabel[] = "RDMA-Mode";
constexpr char kDispchar[] = "";     // an ordinary option, shown as it is
constexpr int kDispsize = 8;         // "require" and a little room

}  // namespace

std::optional<std::string> service_in_string(const char* conninfo) noexcept {
    try {
        char* error = nullptr;
        PQconninfoOption* options = libpq().PQconninfoParse(conninfo, &error);
        std::free(error);  // PQfreemem is free(); this library does not link libpq
        if (options == nullptr) return std::nullopt;
        std::optional<std::string> service;
        for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o)
            if (std::strcmp(o->keyword, "service") == 0 && o->val != nullptr) service = o->val;
        libpq().PQconninfoFree(options);
        return service;
    } catch (...) {
        return std::nullopt;
    }
}

std::optional<std::string> service_in_arrays(const char* const* keywords, const char* const* values,
                                             bool expand_dbname) noexcept {
    try {
        std::optional<std::string> service;
        bool dbname_seen = false;
        for (std::size_t i = 0; keywords[i] != nullptr; ++i) {
            const char* value = values[i];
            if (std::strcmp(keywords[i], "dbname") == 0 && expand_dbname && !dbname_seen && value != nullptr) {
                dbname_seen = true;
                if (conninfo::is_recognized_connection_string(value)) {
                    if (auto inner = service_in_string(value)) service = std::move(inner);
                    continue;
                }
            }
            if (value == nullptr || value[0] == '\0') continue;
            if (std::strcmp(keywords[i], "service") == 0) service = value;
        }
        return service;
    } catch (...) {
        return std::nullopt;
    }
}

PQconninfoOption* with_rsocket_option(PQconninfoOption* options, const std::optional<std::string>& value) noexcept {
    if (options == nullptr) return options;
    std::size_t n = 0;
    while (options[n].keyword != nullptr) {
        if (std::strcmp(options[n].keyword, kKeywordText) == 0) return options;  // already there (a libpq that knows it)
        ++n;
    }
    char* val = nullptr;
    if (value) {
        val = strdup(value->c_str());
        if (val == nullptr) return options;
    }
    auto* grown = static_cast<PQconninfoOption*>(std::realloc(options, (n + 2) * sizeof(PQconninfoOption)));
    if (grown == nullptr) {
        std::free(val);
        return options;
    }
    grown[n] = PQconninfoOption{};
    grown[n].keyword = const_cast<char*>(kKeywordText);
    grown[n].envvar = const_cast<char*>(kEnvvar);
    grown[n].compiled = nullptr;
    grown[n].val = val;
    grown[n].label = const_cast<char*>(kLabel);
    grown[n].dispchar = const_cast<char*>(kDispchar);
    grown[n].dispsize = kDispsize;
    grown[n + 1] = PQconninfoOption{};
    return grown;
}

}  // namespace pg_rdma::client
