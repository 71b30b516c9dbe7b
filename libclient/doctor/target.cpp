#include "libclient/doctor/target.hpp"

#include <libpq-fe.h>

#include <memory>

#include "libclient/conninfo/connection_string.hpp"

namespace pg_rdma::doctor {
namespace {

std::string first_of_list(std::string_view list, bool& more) {
    const std::size_t comma = list.find(',');
    more = more || comma != std::string_view::npos;
    return std::string(list.substr(0, comma));
}

bool is_port(std::string_view s) {
    if (s.empty() || s.size() > 5) return false;
    unsigned value = 0;
    for (const char c : s) {
        if (c < '0' || c > '9') return false;
        value = value * 10 + static_cast<unsigned>(c - '0');
    }
    return value > 0 && value <= 65535;
}

// HOST, HOST:PORT or [IPV6]:PORT; a bare IPv6 address has several ':'.
bool split_host_port(std::string_view text, std::string& host, std::string& port, std::string& error) {
    if (!text.empty() && text.front() == '[') {
        const std::size_t close = text.find(']');
        if (close == std::string_view::npos) return error = "an IPv6 address in [ ] lacks its ]", false;
        host = std::string(text.substr(1, close - 1));
        const std::string_view rest = text.substr(close + 1);
        if (rest.empty()) return true;
        if (rest.front() != ':' || !is_port(rest.substr(1))) return error = "the port after [address] is not a port", false;
        port = std::string(rest.substr(1));
        return true;
    }
    const std::size_t colon = text.rfind(':');
    if (colon != std::string_view::npos && text.find(':') == colon) {
        if (!is_port(text.substr(colon + 1))) return error = "the part after ':' is not a port number", false;
        host = std::string(text.substr(0, colon));
        port = std::string(text.substr(colon + 1));
        return true;
    }
    host = std::string(text);
    return true;
}

struct OptionsDeleter {
    void operator()(PQconninfoOption* o) const { PQconninfoFree(o); }
};

}  // namespace

std::optional<Target> parse_target(std::string_view text, const Defaults& defaults, std::string& error) {
    Target t;
    std::string hostaddr;
    bool more = false;
    if (conninfo::is_uri(text) || text.find('=') != std::string_view::npos) {
        // libpq parses it (it does not know with_rsocket: taken out first).
        const conninfo::Extraction extracted = conninfo::extract_from_connection_string(text);
        char* message = nullptr;
        std::unique_ptr<PQconninfoOption, OptionsDeleter> options(PQconninfoParse(extracted.rewritten.c_str(), &message));
        if (!options) {
            error = message != nullptr ? message : "out of memory";
            PQfreemem(message);
            while (!error.empty() && error.back() == '\n') error.pop_back();
            return std::nullopt;
        }
        for (const PQconninfoOption* o = options.get(); o->keyword != nullptr; ++o) {
            if (o->val == nullptr || o->val[0] == '\0') continue;
            const std::string_view key = o->keyword;
            if (key == "host") t.host = first_of_list(o->val, more);
            else if (key == "hostaddr") hostaddr = first_of_list(o->val, more);
            else if (key == "port") t.port = first_of_list(o->val, more);
        }
    } else if (!text.empty() && !split_host_port(text, t.host, t.port, error)) {
        return std::nullopt;
    }
    if (t.host.empty() && hostaddr.empty()) {
        if (defaults.pghost != nullptr) t.host = first_of_list(defaults.pghost, more);
        if (defaults.pghostaddr != nullptr) hostaddr = first_of_list(defaults.pghostaddr, more);
    }
    if (t.port.empty()) t.port = defaults.pgport != nullptr && defaults.pgport[0] != '\0' ? defaults.pgport : kDefaultPort;
    if (!is_port(t.port)) return error = "port \"" + t.port + "\" is not a port number", std::nullopt;
    if (t.host.empty() && hostaddr.empty())
        return error = "no server given (a host, host:port, a conninfo string or a URI; or PGHOST)", std::nullopt;
    if (hostaddr.empty() && !t.host.empty() && t.host.front() == '/')
        return error = "host " + t.host + " is a Unix-domain socket directory: RDMA carries TCP sessions only",
               std::nullopt;
    t.address = hostaddr.empty() ? t.host : hostaddr;
    if (t.host.empty()) t.host = hostaddr;
    t.more_hosts = more;
    return t;
}

}  // namespace pg_rdma::doctor
