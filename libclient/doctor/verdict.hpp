// `pgrdma doctor`'s conclusion from what it found: one sentence, what to
// do about it, and an exit code a script can act on. Pure: tested on its
// own with facts made up for each case.
#pragma once

#include <string>

#include "libclient/doctor/local_facts.hpp"
#include "libclient/doctor/probe_end.hpp"

namespace pg_rdma::doctor {

// Exit codes, by where the cause lies.
inline constexpr int kExitWorks = 0;
inline constexpr int kExitThisHost = 1;   // no device, no provider, memlock, descriptors, no RDMA route
inline constexpr int kExitUsage = 2;      // the command line; --server: a role that may not run the check
inline constexpr int kExitServer = 3;     // the server's pg_rdma declined (its reason), or did not answer
inline constexpr int kExitNetwork = 4;    // the RDMA connection did not come through, or the echo broke
inline constexpr int kExitNoPgRdma = 5;   // PostgreSQL without pg_rdma, or no PostgreSQL at all
inline constexpr int kExitNoServer = 6;   // no TCP connection to the server

struct Facts {
    std::string server;  // "10.0.0.5:5432" as the verdict names it
    DeviceFacts devices;
    LimitFacts limits;
    RouteFacts route;
    ProbeRun probe;
    int timeout_ms = 0;
};

struct Verdict {
    int exit_code = kExitWorks;
    // Stable name for scripts: "works", "memlock", "firewall", ...; the
    // server's declines are "server_" and its outcome ("server_memlock").
    std::string cause;
    std::string text;   // "RDMA works to ..." or "no RDMA to ...: why"
    std::string fix;    // empty when it works
};

Verdict decide(const Facts& facts);

// "256 KiB", "8 MiB", "unlimited".
std::string format_bytes(std::uint64_t bytes);

}  // namespace pg_rdma::doctor
