// The probe itself: a TCP connection to the server, the probe request
// (protocol/probe.hpp), the RDMA setup a session would make, then round
// trips and a bulk echo over it. No PostgreSQL session starts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "protocol/probe.hpp"
#include "transport/tcp_upgrade.hpp"

namespace pg_rdma::doctor {

struct ProbeRun {
    enum class End {
        TcpFailed,    // no TCP connection to the server
        LocalRefused, // this host cannot set RDMA up (nothing was asked)
        NoPgRdma,     // the server answered as PostgreSQL without pg_rdma
        Declined,     // the server's pg_rdma declined, and said why
        NoAnswer,     // the server did not answer the request in time
        RdmaFailed,   // the RDMA connection was not made
        EchoFailed,   // made, but the echo did not come back whole
        Works,
    };
    End end = End::TcpFailed;
    std::string error;                              // every end but Works
    int code = 0;                                   // errno of the error
    std::optional<protocol::ProbeDecline> decline;  // Declined
    std::string device;                             // from RdmaFailed on: the device used (Works)
    double tcp_ms = 0;                              // TCP connect time
    double setup_ms = 0;                            // request to RDMA connection made
    double round_trip_us = 0;                       // median of the small round trips
    std::uint64_t bulk_bytes = 0;                   // echoed in the bulk part, each way
};

inline constexpr int kRoundTrips = 32;
inline constexpr std::size_t kRoundTripBytes = 64;      // bytes per round trip
inline constexpr std::size_t kBulkBytes = 64 * 1024;   // bytes each way

ProbeRun run_probe(const std::string& address, const std::string& port, int timeout_ms);

const char* to_string(ProbeRun::End end) noexcept;

}  // namespace pg_rdma::doctor
