// Counters that outlive sessions, behind the pg_stat_rdma_outcomes and
// pg_stat_rdma_devices views: how sessions on pg_rdma addresses came out
// (session_outcomes.hpp), and per RDMA device the sessions and bytes of
// those that ran on it.
//
// Kept in shared memory, as PostgreSQL keeps its cumulative statistics
// while the server runs: a crash-restart creates the block anew, so the
// counters start again from zero with stats_reset at that time; so does a
// server restart (unlike PostgreSQL's own, they are not written to disk at
// shutdown). pg_stat_reset_rdma() zeroes them. Each counter is an atomic
// add by the backend that saw the event; readers take no lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server_ext/session_outcomes.hpp"

namespace pg_rdma::server {

// Called from _PG_init: chains shmem_request_hook and shmem_startup_hook.
void install_stat_totals_hooks();

// None of these raises a PostgreSQL error or throws.
void count_outcome(Outcome outcome);
// A session that started on `device`; at its end, the bytes it moved (both
// transports, a failover included).
void count_device_session(std::string_view device);
void count_device_bytes(std::string_view device, std::uint64_t sent, std::uint64_t received);
void count_device_failover(std::string_view device);
void reset_stat_totals();

// Whether this session's line for `outcome` is the one to log: at most one
// per outcome every kOutcomeLogIntervalSeconds server-wide, as PostgreSQL's
// own log is a DBA's to read, not a flood a crowd of clients writes. When
// it is, `since` says how many such sessions went unlogged before it.
inline constexpr long kOutcomeLogIntervalSeconds = 10;
bool outcome_log_due(Outcome outcome, std::uint64_t& since);

// For the views: plain copies (each field read atomically, not the whole
// set at one instant, as PostgreSQL's own views read theirs).
// Rows of device counters: a 17th device's sessions are counted in
// pg_stat_rdma_outcomes but in no device row.
inline constexpr std::size_t kMaxDevices = 16;
inline constexpr std::size_t kDeviceNameSize = 64;  // bytes, NUL included
struct OutcomeTotals {
    std::uint64_t sessions;
    std::int64_t last_at;  // TimestampTz; 0 when never
};
struct DeviceTotals {
    char name[kDeviceNameSize];
    std::uint64_t sessions;
    std::uint64_t failovers;
    std::uint64_t bytes_sent;
    std::uint64_t bytes_received;
};
bool stat_totals_ready();
OutcomeTotals read_outcome_totals(Outcome outcome);
// false for an unused row.
bool read_device_totals(std::size_t index, DeviceTotals& out);
std::int64_t stat_totals_reset_at();  // TimestampTz

}  // namespace pg_rdma::server
