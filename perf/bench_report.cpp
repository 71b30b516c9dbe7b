#include "perf/bench_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace pg_rdma::perf {

namespace {

constexpr double kBytesPerMiB = 1024.0 * 1024.0;

// Nearest rank: the smallest sample with at least `fraction` of all samples
// at or below it (the convention of perftest's percentile columns).
double nearest_rank(const std::vector<double>& sorted, double fraction)
{
    const double rank = std::ceil(fraction * static_cast<double>(sorted.size()));
    const auto index = static_cast<std::size_t>(std::max(rank, 1.0)) - 1;
    return sorted[std::min(index, sorted.size() - 1)];
}

std::string format(const char* fmt, auto... args)
{
    char buf[512];
    std::snprintf(buf, sizeof buf, fmt, args...);
    return buf;
}

}  // namespace

LatencySummary summarize_latency(std::vector<double>& samples)
{
    LatencySummary s;
    if (samples.empty())
        return s;
    std::sort(samples.begin(), samples.end());
    s.p50_us = nearest_rank(samples, 0.50);
    s.p99_us = nearest_rank(samples, 0.99);
    s.avg_us = std::accumulate(samples.begin(), samples.end(), 0.0) /
               static_cast<double>(samples.size());
    s.min_us = samples.front();
    s.max_us = samples.back();
    return s;
}

void print_line(const std::string& line)
{
    std::fputs(line.c_str(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
}

void print_listening(const char* transport, std::uint16_t port)
{
    print_line(format("listening transport=%s port=%u", transport, unsigned{port}));
}

void print_latency(const std::string& label, std::size_t size, std::size_t iters,
                   const LatencySummary& s, std::uint64_t stalls, double cpu_us)
{
    print_line(format("latency %s size=%zu iters=%zu p50_us=%.2f p99_us=%.2f "
                      "avg_us=%.2f min_us=%.2f max_us=%.2f stalls=%llu cpu_us=%.0f",
                      label.c_str(), size, iters, s.p50_us, s.p99_us, s.avg_us, s.min_us,
                      s.max_us, static_cast<unsigned long long>(stalls), cpu_us));
}

void print_bandwidth(const std::string& label, std::size_t size, std::uint64_t messages,
                     double seconds, std::uint64_t stalls, double cpu_us)
{
    const double bytes = static_cast<double>(size) * static_cast<double>(messages);
    print_line(format("bandwidth %s size=%zu messages=%llu seconds=%.3f MiBps=%.2f "
                      "stalls=%llu cpu_us=%.0f",
                      label.c_str(), size, static_cast<unsigned long long>(messages), seconds,
                      bytes / kBytesPerMiB / seconds, static_cast<unsigned long long>(stalls), cpu_us));
}

void print_served(const char* kind, std::size_t size, std::uint64_t count, double cpu_us)
{
    print_line(format("served %s size=%zu count=%llu cpu_us=%.0f", kind, size,
                      static_cast<unsigned long long>(count), cpu_us));
}

}  // namespace pg_rdma::perf
