// `pgrdma proxy`'s command line:
//
//   pgrdma proxy [--listen ADDRESS]... [--max-connections N]
//                [--connect-timeout SECONDS] SERVER
//
// ADDRESS and SERVER as endpoints.hpp says; --listen at least once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "libclient/proxy/endpoints.hpp"

namespace pg_rdma::proxy {

// Defaults: as many sessions as PostgreSQL's default max_connections;
// libpq's habit for a server that does not answer (connect_timeout is
// unset there, but the transport's upgrade waits 10 s); PostgreSQL's
// authentication_timeout for a client that connects and says nothing.
inline constexpr unsigned kDefaultMaxConnections = 100;
inline constexpr std::chrono::seconds kDefaultConnectTimeout{10};
inline constexpr std::chrono::seconds kOpeningTimeout{60};
inline constexpr unsigned kMaxConnectionsLimit = 100000;
inline constexpr unsigned kMaxConnectTimeoutSeconds = 3600;

struct ProxyOptions {
    ServerEndpoint server;
    std::vector<ListenEndpoint> listen;
    unsigned max_connections = kDefaultMaxConnections;
    std::chrono::seconds connect_timeout = kDefaultConnectTimeout;
    bool help = false;
};

// Whether an absolute path is a directory (the file system's answer; the
// tests give their own).
using IsDirectory = std::function<bool(const std::string&)>;

// Fills `out` from `args` (argv without the program name) and returns "",
// or says what is wrong. --help alone is valid.
std::string parse_options(const std::vector<std::string_view>& args, const IsDirectory& is_directory,
                          ProxyOptions& out);

extern const char* const kUsage;

}  // namespace pg_rdma::proxy
