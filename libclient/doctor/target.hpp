// Which server `pgrdma doctor` looks at: the command line's target as a
// DBA writes it: HOST, HOST:PORT, [IPV6]:PORT, a conninfo string
// ("host=db1 port=5433 with_rsocket=true") or a postgresql:// URI, with
// PGHOST, PGHOSTADDR and PGPORT as libpq's defaults. Of a list of hosts
// the first is taken, as libpq tries it first.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace pg_rdma::doctor {

inline constexpr const char* kDefaultPort = "5432";

struct Target {
    std::string host;     // as given: a name or an address
    std::string address;  // what to connect to: hostaddr when given, else host
    std::string port;
    bool more_hosts = false;  // the string named more than one host
};

// Environment values, passed in so that the parsing stays pure.
struct Defaults {
    const char* pghost = nullptr;
    const char* pghostaddr = nullptr;
    const char* pgport = nullptr;
};

// nullopt with `error` set when the target cannot be understood, or names
// a Unix-domain socket (which RDMA cannot carry).
std::optional<Target> parse_target(std::string_view text, const Defaults& defaults, std::string& error);

}  // namespace pg_rdma::doctor
