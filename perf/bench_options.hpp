// transport_bench's command line (usage in kUsage and transport_bench.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "perf/bench_error.hpp"
#include "perf/bench_phases.hpp"
#include "protocol/upgrade.hpp"

namespace pg_rdma::perf {

inline constexpr std::uint16_t kDefaultPort = 18600;

extern const char* const kUsage;

// A command line that cannot be run: main() prints it with kUsage.
struct UsageError : BenchError {
    using BenchError::BenchError;
};

enum class Role { Server, Client, Settings };

struct Options {
    Role role = Role::Server;
    std::string addr;
    std::uint16_t port = kDefaultPort;
    bool tcp = false;
    bool rsocket = false;     // librdmacm's rsocket instead of ours (rsocket_stream.hpp)
    bool spin = false;        // busy-poll instead of sleeping (transport_bench.cpp)
    protocol::Nonce nonce{};  // both ends must agree; all zeros by default
    ClientPlan plan;
};

// Throws UsageError.
Options parse_options(int argc, char** argv);

}  // namespace pg_rdma::perf
