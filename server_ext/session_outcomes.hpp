// How a session on a pg_rdma address came out, as the cumulative counters
// (stat_totals.hpp) and the pg_stat_rdma_outcomes view name it. Pure: no
// PostgreSQL, so the classification is unit-tested on its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace pg_rdma::server {

enum class Outcome : std::uint8_t {
    // How a session started: exactly one of these per session.
    Upgraded,      // on RDMA
    NotRequested,  // the client sent no upgrade request (with_rsocket false, or another client)
    NoDevice,      // no RDMA device for the address the client reached, or none that opens
    Memlock,       // RLIMIT_MEMLOCK too low for the pinned buffers
    Descriptors,   // out of file descriptors
    Timeout,       // the client did not complete its RDMA connection in time
    ClientGaveUp,  // the client abandoned RDMA and went on over TCP
    NotOffered,    // the address is not in pg_rdma.listen_addresses
    NotAccepting,  // the server is starting, stopping or full: its refusal follows on TCP
    HbaRejects,    // no pg_hba.conf line could admit the client: declined before any pinning
    OverCap,       // over pg_rdma.max_unauthenticated_sessions or _memory
    SetupError,    // any other setup failure; the session went on over TCP
    SetupFailed,   // the upgrade broke the TCP connection: the session ended
    // What happened later to a session that started on RDMA.
    FailedOver,  // RDMA failed; the session went on over its TCP connection
    Failed,      // RDMA failed and the session ended, its TCP connection still open
    // Not a session: a probe from `pgrdma doctor`, whatever it was told.
    Probe,
};
inline constexpr std::size_t kOutcomeCount = static_cast<std::size_t>(Outcome::Probe) + 1;

// The name a DBA sees ("no_device"); stable, lower case.
std::string_view outcome_name(Outcome outcome) noexcept;
// What a setup that fell back to TCP with errno `code` counts as.
Outcome classify_fallback(int code) noexcept;
// The inverse of outcome_name(), for tests and the reset function.
std::optional<Outcome> outcome_from_name(std::string_view name) noexcept;

}  // namespace pg_rdma::server
