// What a probe found (ProbeRun), and how one that did not reach its echo
// ended, from where the upgrade stopped and its errno: the verdict's first
// sorting. Pure, unit-tested.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "protocol/probe.hpp"

namespace pg_rdma::doctor {

enum class ProbeEnd {
    TcpFailed,     // no TCP connection to the server
    LocalRefused,  // this host cannot set RDMA up (nothing was asked)
    NotPostgres,   // what answered is no PostgreSQL: closed at the request, or a reply no server sends
    NoPgRdma,      // the server answered as PostgreSQL without pg_rdma ('E')
    Declined,      // the server's pg_rdma declined, and said why ('D')
    NoAnswer,      // the server did not answer the request in time
    RdmaFailed,    // after 'R': the RDMA connection was not made
    EchoFailed,    // made, but the echo did not come back whole over RDMA
    Works,
};

struct ProbeRun {
    ProbeEnd end = ProbeEnd::TcpFailed;
    std::string error;                              // every end but Works
    int code = 0;                                   // errno of the error
    std::optional<protocol::ProbeDecline> decline;  // Declined
    std::string device;                             // from the RDMA connection on
    double tcp_ms = 0;                              // TCP connect time
    double setup_ms = 0;                            // request to RDMA connection made
    double round_trip_us = 0;                       // median of the small round trips
    std::uint64_t bulk_bytes = 0;                   // echoed in the bulk part, each way
};

inline constexpr int kRoundTrips = 32;
inline constexpr std::size_t kRoundTripBytes = 64;     // bytes per round trip
inline constexpr std::size_t kBulkBytes = 64 * 1024;  // bytes each way

// Where the client's upgrade was when it ended.
enum class UpgradeStage { Requesting, AwaitingReply, Connecting };

// `declined`: the server sent 'D'; `code`: the upgrade's errno.
ProbeEnd classify_probe_end(UpgradeStage stage, int code, bool declined) noexcept;

const char* to_string(ProbeEnd end) noexcept;

}  // namespace pg_rdma::doctor
