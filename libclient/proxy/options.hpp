// `pgrdma proxy`'s command line:
//
//   pgrdma proxy [--listen ADDRESS]... [--max-connections N]
//                [--connect-timeout SECONDS] [--drain-timeout SECONDS]
//                [--socket-mode OCTAL] SERVER
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
// the transport's own wait for a server's reply; PostgreSQL's
// authentication_timeout for a client that connects and says nothing;
// after SIGTERM, well inside systemd's 90 s before its SIGKILL; a socket
// only the proxy's own user may use (the server sees every session as
// this host's, so pg_hba.conf cannot tell local users apart).
inline constexpr unsigned kDefaultMaxConnections = 100;
inline constexpr std::chrono::seconds kDefaultConnectTimeout{10};
inline constexpr std::chrono::seconds kOpeningTimeout{60};
inline constexpr std::chrono::seconds kDefaultDrainTimeout{30};
inline constexpr unsigned kDefaultSocketMode = 0700;
// Each session holds about 8 descriptors in the proxy (the client's, the
// server's TCP socket and the RDMA session's), and libpq_rdma.so follows
// numbers below 65536 only: 5000 sessions stay well inside that.
inline constexpr unsigned kMaxConnectionsLimit = 5000;
inline constexpr unsigned kMaxTimeoutSeconds = 3600;

struct ProxyOptions {
    ServerEndpoint server;
    std::vector<ListenEndpoint> listen;
    unsigned max_connections = kDefaultMaxConnections;
    std::chrono::seconds connect_timeout = kDefaultConnectTimeout;
    std::chrono::seconds drain_timeout = kDefaultDrainTimeout;
    unsigned socket_mode = kDefaultSocketMode;
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
