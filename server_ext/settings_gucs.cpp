// The pg_rdma.* parameters of the transport are PGC_POSTMASTER:
// listen_addresses changes the postmaster's sockets, and the combination of
// the others is checked once, at startup (check_settings in _PG_init), so a
// value that could only be checked alone on reload never reaches a session.
// output_batching is a session's choice (PGC_USERSET) and checks nothing.
#include "server_ext/settings_gucs.hpp"

#include <algorithm>
#include <chrono>

#include "transport/endpoint.hpp"

#include "server_ext/pg_headers.hpp"

namespace pg_rdma::server {
namespace {

using transport::Settings;
constexpr Settings kDefaults{};
constexpr int kBytesPerKiB = 1024;

/* ---- GUC variables (boot values from transport::Settings) ---- */
char* rdma_listen_addresses = nullptr;  // comma list, "" = off
char* client_library = nullptr;          // libpq_rdma.so for server processes' own libpq connections
int rx_buffer_size_kb = static_cast<int>(kDefaults.rx_buffer_size / kBytesPerKiB);        // kB
int keepalive_interval_ms = static_cast<int>(kDefaults.keepalive_interval.count());       // ms
int keepalive_timeout_ms = static_cast<int>(kDefaults.keepalive_timeout.count());         // ms
int keepalive_min_interval_ms = static_cast<int>(kDefaults.keepalive_min_interval.count());  // ms
int keepalive_max_timeout_ms = static_cast<int>(kDefaults.keepalive_max_timeout.count());    // ms
int busy_poll_us = static_cast<int>(kDefaults.busy_poll.count());                         // µs
int busy_poll_max_us = static_cast<int>(kDefaults.busy_poll_max.count());                 // µs
int connect_timeout_ms = static_cast<int>(kDefaults.connect_timeout.count());             // ms
bool output_batching = true;             // full output buffers go with MSG_MORE (session/output_batching.hpp)

/* ---- ranges: the protocol's limits; combinations are settings_problem()'s ---- */
constexpr int kMinRxBufferKiB = static_cast<int>(protocol::kMinRxBufferSize / kBytesPerKiB);
constexpr int kMaxRxBufferKiB = static_cast<int>(protocol::kMaxRxBufferSize / kBytesPerKiB);
constexpr int kMinIntervalMs = static_cast<int>(protocol::kMinKeepaliveIntervalMs);
constexpr int kMaxIntervalMs = static_cast<int>(protocol::kMaxKeepaliveIntervalMs);
constexpr int kMaxTimeoutMs = static_cast<int>(protocol::kMaxKeepaliveTimeoutMs);
constexpr int kMaxBusyPollUs = static_cast<int>(transport::kMaxBusyPoll.count());
constexpr int kMaxConnectTimeoutMs = 3'600'000;  // 1 h: longer is a typo, not a tune
constexpr int kMsPerSecond = 1000;

// A backend's RDMA setup runs before authentication, under PostgreSQL's
// authentication_timeout (which ends the backend, not the setup). One that
// fails must leave the session at least as long again to authenticate on
// TCP: connect_timeout may take half of authentication_timeout at most (a
// value set above that stops the server; the default is shortened). The
// server's waits for a client that stalls on purpose can add up to three
// connect_timeouts (the setup, the handshake's extension, the wait for
// its first bytes); authentication_timeout then ends that backend.
constexpr int kAuthenticationShare = 2;
int connect_timeout_limit_ms() { return AuthenticationTimeout * (kMsPerSecond / kAuthenticationShare); }

void define_ms(const char* name, const char* short_desc, int* variable, int min_ms, int max_ms) {
    DefineCustomIntVariable(name,
                            short_desc,
                            nullptr,
                            variable,
                            *variable,
                            min_ms,
                            max_ms,
                            PGC_POSTMASTER,
                            GUC_UNIT_MS,
                            nullptr,
                            nullptr,
                            nullptr);
}

}  // namespace

void define_settings_gucs() {
    DefineCustomStringVariable("pg_rdma.listen_addresses",
                               "Addresses on which RDMA sessions are offered (also served over TCP).",
                               "Comma-separated host names or addresses; * means every local address. "
                               "Empty disables RDMA listening.",
                               &rdma_listen_addresses,
                               "",
                               PGC_POSTMASTER,
                               GUC_LIST_INPUT,
                               nullptr,
                               nullptr,
                               nullptr);
    DefineCustomStringVariable("pg_rdma.client_library",
                               "The client library that gives this server's own libpq connections with_rsocket.",
                               "Walreceivers, logical replication workers, postgres_fdw and dblink load it "
                               "when they first connect. Empty: those connections are plain libpq.",
                               &client_library,
                               PG_RDMA_CLIENT_LIBRARY,
                               PGC_POSTMASTER,
                               0,
                               nullptr,
                               nullptr,
                               nullptr);
    DefineCustomIntVariable("pg_rdma.rx_buffer_size",
                            "Size of a session's pinned receive ring.",
                            "A multiple of 4 kB.",
                            &rx_buffer_size_kb,
                            rx_buffer_size_kb,
                            kMinRxBufferKiB,
                            kMaxRxBufferKiB,
                            PGC_POSTMASTER,
                            GUC_UNIT_KB,
                            nullptr,
                            nullptr,
                            nullptr);
    define_ms("pg_rdma.keepalive_interval", "Probe an RDMA peer after this much silence.",
              &keepalive_interval_ms, kMinIntervalMs, kMaxIntervalMs);
    define_ms("pg_rdma.keepalive_timeout", "An RDMA peer silent this long is dead; at least twice the interval.",
              &keepalive_timeout_ms, 2 * kMinIntervalMs, kMaxTimeoutMs);
    define_ms("pg_rdma.keepalive_min_interval", "Shortest keepalive interval a client may negotiate.",
              &keepalive_min_interval_ms, kMinIntervalMs, kMaxIntervalMs);
    define_ms("pg_rdma.keepalive_max_timeout", "Longest keepalive timeout a client may negotiate.",
              &keepalive_max_timeout_ms, 2 * kMinIntervalMs, kMaxTimeoutMs);
    DefineCustomIntVariable("pg_rdma.busy_poll",
                            "Microseconds a waiting backend polls its completion queue before sleeping.",
                            "0 disables busy polling.",
                            &busy_poll_us,
                            busy_poll_us,
                            0,
                            kMaxBusyPollUs,
                            PGC_POSTMASTER,
                            0,
                            nullptr,
                            nullptr,
                            nullptr);
    DefineCustomIntVariable("pg_rdma.busy_poll_max",
                            "Longest a backend polls for the client's next message before sleeping, in microseconds.",
                            "The poll adapts between pg_rdma.busy_poll and this while the client's messages come "
                            "that fast; never less than pg_rdma.busy_poll.",
                            &busy_poll_max_us,
                            busy_poll_max_us,
                            0,
                            kMaxBusyPollUs,
                            PGC_POSTMASTER,
                            0,
                            nullptr,
                            nullptr,
                            nullptr);
    define_ms("pg_rdma.connect_timeout", "Longest RDMA session setup: resolve, connect, negotiate.",
              &connect_timeout_ms, 1, kMaxConnectTimeoutMs);
    DefineCustomBoolVariable("pg_rdma.output_batching",
                             "Joins full output buffers into larger RDMA writes.",
                             "Off: every 8 kB buffer PostgreSQL sends goes out at once, as over TCP, "
                             "also while the backend computes between them.",
                             &output_batching,
                             output_batching,
                             PGC_USERSET,
                             0,
                             nullptr,
                             nullptr,
                             nullptr);
}

transport::Settings settings_from_gucs() {
    Settings s;
    s.rx_buffer_size = static_cast<std::uint32_t>(rx_buffer_size_kb) * kBytesPerKiB;
    s.keepalive_interval = transport::Millis{keepalive_interval_ms};
    s.keepalive_timeout = transport::Millis{keepalive_timeout_ms};
    s.keepalive_min_interval = transport::Millis{keepalive_min_interval_ms};
    s.keepalive_max_timeout = transport::Millis{keepalive_max_timeout_ms};
    s.busy_poll = std::chrono::microseconds{busy_poll_us};
    // The adaptive spin's ceiling follows busy_poll up: a server that only
    // raised busy_poll keeps a fixed spin of that length, as before the
    // ceiling was a parameter.
    s.busy_poll_max = std::max(std::chrono::microseconds{busy_poll_max_us}, s.busy_poll);
    // Left at its default, or with authentication_timeout lowered by a
    // reload since the check at startup: the setup keeps within it.
    s.connect_timeout = transport::Millis{std::min(connect_timeout_ms, connect_timeout_limit_ms())};
    return s;
}

std::string_view settings_gucs_problem() {
    // Only a value someone set is refused; the default yields (above).
    const bool set_explicitly = connect_timeout_ms != static_cast<int>(kDefaults.connect_timeout.count());
    if (set_explicitly && connect_timeout_ms > connect_timeout_limit_ms()) {
        static char problem[256];
        snprintf(problem, sizeof problem,
                 "connect_timeout (%d ms) must be at most half of PostgreSQL's authentication_timeout (%d s): a "
                 "session whose RDMA setup fails continues on TCP and still has to authenticate within it",
                 connect_timeout_ms, AuthenticationTimeout);
        return problem;
    }
    Settings s = settings_from_gucs();
    s.connect_timeout = transport::Millis{connect_timeout_ms};
    return transport::settings_problem(s);
}

std::uint64_t session_pinned_bytes() { return transport::Endpoint::pinned_bytes(settings_from_gucs()); }

bool output_batching_guc() { return output_batching; }

const char* client_library_guc() { return client_library != nullptr ? client_library : ""; }

const char* rdma_listen_addresses_guc() { return rdma_listen_addresses != nullptr ? rdma_listen_addresses : ""; }

}  // namespace pg_rdma::server
