// The lines transport_bench prints: one fact per line, "word key=value ...",
// so perf/report.py (and a person) can read them. Every line is flushed at
// once because the runner watches the server's output for "listening".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pg_rdma::perf {

struct LatencySummary {
    double p50_us = 0;
    double p99_us = 0;
    double avg_us = 0;
    double min_us = 0;
    double max_us = 0;
};

// Nearest-rank percentiles of one-way latencies (µs); sorts `samples`.
LatencySummary summarize_latency(std::vector<double>& samples);

void print_line(const std::string& line);
void print_listening(const char* transport, std::uint16_t port);
// `label` names what was measured: "transport=rdma wait=poll". `cpu_us`:
// this process's CPU time over the measured phases (process_cpu.hpp).
void print_latency(const std::string& label, std::size_t size, std::size_t iters,
                   const LatencySummary& s, std::uint64_t stalls, double cpu_us);
void print_bandwidth(const std::string& label, std::size_t size, std::uint64_t messages,
                     double seconds, std::uint64_t stalls, double cpu_us);
// The server's line for each phase it served: `count` messages of `size`.
void print_served(const char* kind, std::size_t size, std::uint64_t count, double cpu_us);

}  // namespace pg_rdma::perf
