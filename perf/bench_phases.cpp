// The ping-pong and streaming measurements (client) and the echo/sink loop
// (server). See bench_phases.hpp for the phase protocol.
#include "perf/bench_phases.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "perf/bench_error.hpp"
#include "perf/bench_report.hpp"
#include "perf/cycle_counter.hpp"
#include "perf/process_cpu.hpp"

namespace pg_rdma::perf {

namespace {

using Clock = std::chrono::steady_clock;

enum class PhaseKind : std::uint32_t { Done = 0, Latency = 1, Bandwidth = 2 };

struct PhaseHeader {
    std::uint32_t kind = 0;
    std::uint32_t size = 0;
    std::uint64_t count = 0;
};
constexpr std::size_t kHeaderSize = 16;  // bytes on the wire
static_assert(sizeof(PhaseHeader) == kHeaderSize);

// Round trips before each latency measurement: they warm caches and the
// transport's rings, and their rate sizes the first measured phase.
constexpr std::uint64_t kLatencyWarmupRoundTrips = 20;
// Fewer samples than this make p99 meaningless, whatever the time budget.
constexpr std::uint64_t kMinLatencyIters = 100;
// Bytes streamed before each bandwidth measurement, for the same reasons.
constexpr std::size_t kBandwidthWarmupBytes = 4u << 20;
constexpr std::uint64_t kMinBandwidthMessages = 8;
// Length of one phase within a measurement (s): each phase is sized from the
// rate measured in the one before.
constexpr double kChunkSeconds = 0.25;
constexpr unsigned char kAckByte = 0xA5;

double seconds_since(Clock::time_point start)
{
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// --- wire ------------------------------------------------------------------

void send_header(ByteStream& stream, PhaseKind kind, std::size_t size, std::uint64_t count,
                 IoCounters& io)
{
    PhaseHeader h;
    h.kind = static_cast<std::uint32_t>(kind);
    h.size = static_cast<std::uint32_t>(size);
    h.count = count;
    std::array<unsigned char, kHeaderSize> bytes{};
    std::memcpy(bytes.data(), &h, kHeaderSize);
    write_all(stream, bytes.data(), bytes.size(), io);
}

// False once the client closed without saying done.
bool receive_header(ByteStream& stream, PhaseHeader& h, IoCounters& io)
{
    std::array<unsigned char, kHeaderSize> bytes{};
    if (!read_all_or_eof(stream, bytes.data(), bytes.size(), io))
        return false;
    std::memcpy(&h, bytes.data(), kHeaderSize);
    if (h.kind > static_cast<std::uint32_t>(PhaseKind::Bandwidth))
        throw BenchError("peer sent unknown phase kind " + std::to_string(h.kind));
    if (h.kind != 0 && (h.size == 0 || h.size > kMaxMessageSize || h.count == 0 ||
                        h.count > kMaxMessageCount))
        throw BenchError("peer sent a phase header out of range (size " +
                         std::to_string(h.size) + ", count " + std::to_string(h.count) + ")");
    return true;
}

// --- client ----------------------------------------------------------------

// One ping-pong phase of `count` round trips; appends each one's length in
// counts of the cycle counter (cycle_counter.hpp), which the caller turns
// into time, and returns the phase's length in seconds.
double ping_pong(ByteStream& stream, std::vector<unsigned char>& buf, std::size_t size,
                 std::uint64_t count, std::vector<std::uint64_t>& round_trip_counts, IoCounters& io)
{
    send_header(stream, PhaseKind::Latency, size, count, io);
    const auto phase_start = Clock::now();
    for (std::uint64_t i = 0; i < count; ++i) {
        const std::uint64_t start = CycleCounter::now();
        write_all(stream, buf.data(), size, io);
        read_all(stream, buf.data(), size, io);
        const std::uint64_t end = CycleCounter::now();
        // An unsigned difference would turn a counter that differs between
        // CPUs into a round trip of centuries: no figure rather than that.
        if (end < start)
            throw BenchError(std::string("the cycle counter (") + CycleCounter::kName +
                             ") went backwards within a round trip: it differs between CPUs "
                             "here, so round trips cannot be timed with it");
        round_trip_counts.push_back(end - start);
    }
    return seconds_since(phase_start);
}

// One streaming phase; returns the seconds from the first byte written to
// the server's ack that it read the last one.
double stream_out(ByteStream& stream, std::vector<unsigned char>& buf, std::size_t size,
                  std::uint64_t count, IoCounters& io)
{
    send_header(stream, PhaseKind::Bandwidth, size, count, io);
    const auto start = Clock::now();
    for (std::uint64_t i = 0; i < count; ++i)
        write_all(stream, buf.data(), size, io);
    unsigned char ack = 0;
    read_all(stream, &ack, 1, io);
    if (ack != kAckByte)
        throw BenchError("server sent a bad bandwidth ack");
    return seconds_since(start);
}

std::string label(const ByteStream& stream)
{
    return std::string("transport=") + stream.name() + " wait=" + (stream.spins() ? "spin" : "poll");
}

// Events per second; a phase too short for the clock to see counts as 1 ns.
double rate(std::uint64_t count, double seconds)
{
    constexpr double kShortestSeconds = 1e-9;
    return static_cast<double>(count) / std::max(seconds, kShortestSeconds);
}

std::uint64_t clamp_count(double fitting, std::uint64_t low, std::uint64_t high)
{
    const double clamped = std::clamp(fitting, static_cast<double>(low), static_cast<double>(high));
    return static_cast<std::uint64_t>(clamped);
}

// Round trips in the next latency phase: a chunk's worth at the latest
// rate, at least what min_iters still lacks, never beyond max_iters.
std::uint64_t next_latency_chunk(double round_trips_per_s, double seconds_left, std::size_t have,
                                 std::uint64_t min_iters, std::uint64_t max_iters)
{
    const double fitting = round_trips_per_s * std::clamp(seconds_left, 0.0, kChunkSeconds);
    const std::uint64_t low = have < min_iters ? min_iters - have : 1;
    return clamp_count(fitting, low, max_iters - have);
}

void measure_latency(ByteStream& stream, std::vector<unsigned char>& buf, std::size_t size,
                     const ClientPlan& plan)
{
    IoCounters io;
    std::vector<std::uint64_t> warmup;
    double round_trips_per_s = rate(
        kLatencyWarmupRoundTrips,
        ping_pong(stream, buf, size, kLatencyWarmupRoundTrips, warmup, io));
    // In phases sized from the latest rate (bench_phases.hpp).
    const std::uint64_t min_iters = std::min(kMinLatencyIters, plan.max_iters);
    io = IoCounters{};
    std::vector<std::uint64_t> counts;
    const CycleRate counter_rate;
    const double cpu_before = process_cpu_us();
    double seconds = 0;
    while (counts.size() < plan.max_iters &&
           (seconds < plan.seconds || counts.size() < min_iters)) {
        const std::uint64_t count = next_latency_chunk(
            round_trips_per_s, plan.seconds - seconds, counts.size(), min_iters, plan.max_iters);
        const double elapsed = ping_pong(stream, buf, size, count, counts, io);
        seconds += elapsed;
        round_trips_per_s = rate(count, elapsed);
    }
    const double cpu_us = process_cpu_us() - cpu_before;
    const double us_per_count = counter_rate.micros_per_count();
    if (us_per_count <= 0)
        throw BenchError(std::string("the cycle counter (") + CycleCounter::kName +
                         ") did not advance during a latency measurement");
    std::vector<double> samples;
    samples.reserve(counts.size());
    for (const std::uint64_t c : counts)
        samples.push_back(static_cast<double>(c) * us_per_count / 2);  // one-way: half the round trip
    // The rate it was timed at, for report.py's check that the counter ran
    // at one rate in every measurement (cycle_counter.hpp).
    std::array<char, 48> rate_field{};
    std::snprintf(rate_field.data(), rate_field.size(), " counter_mhz=%.3f", 1 / us_per_count);
    print_latency(label(stream) + " clock=" + CycleCounter::kName + rate_field.data(), size,
                  samples.size(), summarize_latency(samples), io.stalls, cpu_us);
}

void measure_bandwidth(ByteStream& stream, std::vector<unsigned char>& buf, std::size_t size,
                       const ClientPlan& plan)
{
    IoCounters io;
    const std::uint64_t warmup_count = std::max<std::uint64_t>(kBandwidthWarmupBytes / size, 2);
    double messages_per_s = rate(warmup_count, stream_out(stream, buf, size, warmup_count, io));
    // The budget is spent in chunks, each sized from the rate measured so
    // far: a single phase sized from the short warm-up would miss the budget
    // by a factor of two either way. Each chunk waits for its ack, which
    // costs one round trip per chunk, negligible at kChunkSeconds.
    io = IoCounters{};
    std::uint64_t messages = 0;
    double seconds = 0;
    const double cpu_before = process_cpu_us();
    while (seconds < plan.seconds) {
        const double chunk_s = std::min(kChunkSeconds, plan.seconds - seconds);
        const std::uint64_t count =
            clamp_count(messages_per_s * chunk_s, kMinBandwidthMessages, kMaxMessageCount);
        const double elapsed = stream_out(stream, buf, size, count, io);
        messages += count;
        seconds += elapsed;
        messages_per_s = rate(count, elapsed);
    }
    print_bandwidth(label(stream), size, messages, seconds, io.stalls, process_cpu_us() - cpu_before);
}

// Tells the server to finish and waits until it has closed, so both sides
// are done (and the RDMA close drained) before the client exits.
void finish(ByteStream& stream)
{
    IoCounters io;
    send_header(stream, PhaseKind::Done, 0, 0, io);
    unsigned char byte = 0;
    if (read_all_or_eof(stream, &byte, 1, io))
        throw BenchError("server sent data after done");
}

// --- server ----------------------------------------------------------------

void echo(ByteStream& stream, std::vector<unsigned char>& buf, const PhaseHeader& h,
          IoCounters& io)
{
    for (std::uint64_t i = 0; i < h.count; ++i) {
        read_all(stream, buf.data(), h.size, io);
        write_all(stream, buf.data(), h.size, io);
    }
}

void sink(ByteStream& stream, std::vector<unsigned char>& buf, const PhaseHeader& h,
          IoCounters& io)
{
    for (std::uint64_t i = 0; i < h.count; ++i)
        read_all(stream, buf.data(), h.size, io);
    write_all(stream, &kAckByte, 1, io);
}

}  // namespace

void run_client(ByteStream& stream, const ClientPlan& plan)
{
    const std::size_t largest = *std::max_element(plan.sizes.begin(), plan.sizes.end());
    std::vector<unsigned char> buf(largest, 0x5A);
    for (const std::size_t size : plan.sizes) {
        if (plan.measure == Measure::Latency)
            measure_latency(stream, buf, size, plan);
        else
            measure_bandwidth(stream, buf, size, plan);
    }
    finish(stream);
}

void run_server(ByteStream& stream)
{
    std::vector<unsigned char> buf;
    IoCounters io;
    PhaseHeader h;
    struct Served {
        bool latency;
        std::size_t size;
        std::uint64_t count;
        double cpu_us;
    };
    // Printed once the client is done: a line written between phases
    // would be a write to the log's file (in the guest, over 9p to the
    // host) while the client has already started the next phase.
    std::vector<Served> served;
    while (receive_header(stream, h, io) && h.kind != static_cast<std::uint32_t>(PhaseKind::Done)) {
        buf.resize(std::max<std::size_t>(buf.size(), h.size));
        // What each phase cost this end; counted_report.py adds up a
        // measurement's phases past its warm-up (the first of each size),
        // as the client counts its own.
        const double cpu_before = process_cpu_us();
        const bool latency = h.kind == static_cast<std::uint32_t>(PhaseKind::Latency);
        if (latency)
            echo(stream, buf, h, io);
        else
            sink(stream, buf, h, io);
        served.push_back({latency, h.size, h.count, process_cpu_us() - cpu_before});
    }
    for (const Served& s : served)
        print_served(s.latency ? "latency" : "bandwidth", s.size, s.count, s.cpu_us);
}

}  // namespace pg_rdma::perf
