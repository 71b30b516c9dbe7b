// The probe itself: a TCP connection to the server, the probe request
// (protocol/probe.hpp), the RDMA setup a session would make, then round
// trips and a bulk echo over it. No PostgreSQL session starts.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <string>

#include "libclient/doctor/probe_end.hpp"
#include "transport/event_set.hpp"

namespace pg_rdma::doctor {

using Clock = std::chrono::steady_clock;

// The TCP connection the probe runs on, and the addresses it took (the
// route check follows the same path).
struct TcpLink {
    transport::FileDescriptor fd;
    sockaddr_storage local{};
    sockaddr_storage peer{};
    double ms = 0;      // connect time
    std::string error;  // no connection: why
    int code = 0;
};

TcpLink connect_tcp(const std::string& address, const std::string& port, Clock::time_point until);

// On `link` (TcpFailed with its error when it has no connection).
ProbeRun run_probe(const TcpLink& link, Clock::time_point until);

}  // namespace pg_rdma::doctor
