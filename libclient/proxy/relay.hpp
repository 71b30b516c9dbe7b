// One client's connection, carried to the server: the proxy's only job.
//
// The proxy speaks no PostgreSQL beyond reading the client's first message:
// it connects to the server with an ordinary TCP socket and copies bytes
// both ways. libpq_rdma.so, loaded into the proxy by `pgrdma proxy`, moves
// that socket onto RDMA at its first write, exactly as it does a driver's
// (libclient/README.md, "Drivers that do not come through libpq's
// wrappers"): the same policy, the same fallback, the same readiness for
// poll(). So TLS passes through untouched, a CancelRequest stays on TCP,
// and `require` fails as it fails for any program.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "libclient/proxy/endpoints.hpp"

namespace pg_rdma::proxy {

struct RelaySettings {
    ServerEndpoint server;
    std::chrono::milliseconds connect_timeout{};  // per address of the server
    std::chrono::milliseconds opening_timeout{};  // for the client's first message
    unsigned max_sessions = 0;                    // carried at once; more are refused
};

// Carries the accepted connection `client` (owned: closed on return) until
// either side ends it, counting it in `sessions` while it is carried (a
// client past settings.max_sessions is refused after its first message,
// so that it can read why). `label` names the client in the proxy's log
// lines. Runs in a thread of its own; never throws.
void carry(int client, const RelaySettings& settings, std::atomic<unsigned>& sessions,
           const std::string& label) noexcept;

}  // namespace pg_rdma::proxy
