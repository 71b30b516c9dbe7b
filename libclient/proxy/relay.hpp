// One client's connection, carried to the server: the proxy's only job.
//
// The proxy speaks no PostgreSQL beyond looking at the client's first
// bytes: it connects to the server with an ordinary TCP socket and copies
// bytes both ways. libpq_rdma.so, loaded into the proxy by `pgrdma proxy`,
// moves that socket onto RDMA at its first write, exactly as it does a
// driver's (libclient/README.md, "Drivers that do not come through
// libpq's wrappers"): the same policy, the same fallback, the same
// readiness for poll(). So TLS passes through untouched, a CancelRequest
// stays on TCP, and `require` fails as it fails for any program.
#pragma once

#include <chrono>
#include <string>

#include "libclient/proxy/endpoints.hpp"

namespace pg_rdma::proxy {

struct RelaySettings {
    ServerEndpoint server;
    std::chrono::milliseconds connect_timeout{};  // per address of the server
    std::chrono::milliseconds opening_timeout{};  // for the client's first bytes
};

// Carries the accepted connection `client` (owned: closed on return) until
// either side ends it. `label` names the client in the proxy's log lines.
// Runs in a thread of its own; never throws.
void carry(int client, const RelaySettings& settings, const std::string& label) noexcept;

// Tells a client the proxy will not carry its connection, when the client
// can read that (refusal.hpp); best effort, the caller closes `client`.
void refuse_at_once(int client, const char* sqlstate, const std::string& message) noexcept;

}  // namespace pg_rdma::proxy
