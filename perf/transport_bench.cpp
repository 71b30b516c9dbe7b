// transport_bench: ping-pong latency and streaming bandwidth between two
// processes, over the pg_rdma transport or (--tcp) plain TCP sockets running
// the identical code. perf/run-transport-bench.sh runs it in the Soft-RoCE
// guest next to perftest and rstream; perf/README.md explains the figures.
//
//   transport_bench server --addr IP [--port P] [--tcp] [--spin] [--nonce HEX]
//   transport_bench client --addr IP [--port P] [--tcp] [--spin] [--nonce HEX]
//                          --mode latency|bandwidth --sizes N[,N...]
//                          [--iters N] [--seconds S]
//   transport_bench settings
//
// Output, one fact per line (bench_report.hpp):
//   listening transport=rdma port=18600                        (server)
//   settings transport=rdma ... pinned_bytes=397312            (client, rdma)
//   latency transport=rdma wait=poll size=64 iters=.. p50_us=.. p99_us=.. ...
//   bandwidth transport=rdma wait=poll size=4096 messages=.. MiBps=.. ...
//   stats transport=rdma ...                                   (client)
// Latency is one-way: round trip / 2, as perftest's ib_write_lat reports it.
// After EAGAIN both ends sleep in poll() on the stream's fd, as PostgreSQL
// does; --spin retries at once instead, as perftest and rstream do.
// Exit status: 0 done, 1 failed, 2 usage, 3 built without the transport.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "perf/bench_error.hpp"
#include "perf/bench_phases.hpp"
#include "perf/bench_report.hpp"
#include "perf/byte_stream.hpp"
#include "perf/endpoint.hpp"
#include "perf/tcp_stream.hpp"
#include "protocol/upgrade.hpp"
#ifdef PG_RDMA_BENCH_HAVE_RDMA
#include "perf/rdma_stream.hpp"
#endif

namespace pg_rdma::perf {
namespace {

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitNoTransport = 3;

constexpr std::uint16_t kDefaultPort = 18600;
// A server gives up if no client came within this long (the runner starts
// the client right after "listening"; TCG guests are slow, not this slow).
constexpr int kAcceptTimeoutMs = 60'000;
constexpr std::size_t kKiB = 1024;

constexpr const char* kUsage =
    "usage: transport_bench server --addr IP [--port P] [--tcp] [--spin] [--nonce HEX]\n"
    "       transport_bench client --addr IP [--port P] [--tcp] [--spin] [--nonce HEX]\n"
    "                              --mode latency|bandwidth --sizes N[,N...] (K/M suffixes)\n"
    "                              [--iters N] [--seconds S]\n"
    "       transport_bench settings\n";

struct UsageError : BenchError {
    using BenchError::BenchError;
};

struct NoTransport : BenchError {
    using BenchError::BenchError;
};

enum class Role { Server, Client, Settings };

struct Options {
    Role role = Role::Server;
    std::string addr;
    std::uint16_t port = kDefaultPort;
    bool tcp = false;
    bool spin = false;  // retry after EAGAIN at once instead of poll()
    protocol::Nonce nonce{};  // both ends must agree; all zeros by default
    ClientPlan plan;
    bool mode_given = false;
};

// --- parsing -----------------------------------------------------------------

std::uint64_t parse_count(std::string_view text, const char* what)
{
    std::uint64_t multiplier = 1;
    if (!text.empty() && (text.back() == 'K' || text.back() == 'k'))
        multiplier = kKiB;
    else if (!text.empty() && (text.back() == 'M' || text.back() == 'm'))
        multiplier = kKiB * kKiB;
    if (multiplier != 1)
        text.remove_suffix(1);
    const std::string digits(text);
    char* end = nullptr;
    const unsigned long long value = std::strtoull(digits.c_str(), &end, 10);
    if (digits.empty() || *end != '\0' || value == 0)
        throw UsageError(std::string(what) + ": expected a positive number, got '" + digits + "'");
    return value * multiplier;
}

std::vector<std::size_t> parse_sizes(std::string_view list)
{
    std::vector<std::size_t> sizes;
    while (!list.empty()) {
        const std::size_t comma = list.find(',');
        const std::uint64_t size = parse_count(list.substr(0, comma), "--sizes");
        if (size > kMaxMessageSize)
            throw UsageError("--sizes: " + std::to_string(size) + " is above the maximum " +
                             std::to_string(kMaxMessageSize));
        sizes.push_back(size);
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    }
    if (sizes.empty())
        throw UsageError("--sizes: empty list");
    return sizes;
}

int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

protocol::Nonce parse_nonce(std::string_view hex)
{
    protocol::Nonce nonce{};
    if (hex.size() != 2 * nonce.size())
        throw UsageError("--nonce: expected " + std::to_string(2 * nonce.size()) + " hex digits");
    for (std::size_t i = 0; i < nonce.size(); ++i) {
        const int high = hex_digit(hex[2 * i]);
        const int low = hex_digit(hex[2 * i + 1]);
        if (high < 0 || low < 0)
            throw UsageError("--nonce: not a hex digit");
        nonce[i] = static_cast<std::uint8_t>(high * 16 + low);
    }
    return nonce;
}

std::uint16_t parse_port(std::string_view text)
{
    const std::uint64_t port = parse_count(text, "--port");
    if (port > UINT16_MAX)
        throw UsageError("--port: " + std::string(text) + " is not a port number");
    return static_cast<std::uint16_t>(port);
}

Role parse_role(std::string_view word)
{
    if (word == "server")
        return Role::Server;
    if (word == "client")
        return Role::Client;
    if (word == "settings")
        return Role::Settings;
    throw UsageError("unknown command '" + std::string(word) + "'");
}

Measure parse_measure(std::string_view word)
{
    if (word == "latency")
        return Measure::Latency;
    if (word == "bandwidth")
        return Measure::Bandwidth;
    throw UsageError("--mode: expected latency or bandwidth, got '" + std::string(word) + "'");
}

double parse_seconds(const std::string& text)
{
    char* end = nullptr;
    const double seconds = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(seconds > 0))
        throw UsageError("--seconds: expected a positive number, got '" + text + "'");
    return seconds;
}

// Applies one "--name value" option (or the flag --tcp); returns how many
// arguments it used.
int apply_option(Options& o, std::string_view name, const char* value)
{
    if (name == "--tcp") {
        o.tcp = true;
        return 1;
    }
    if (name == "--spin") {
        o.spin = true;
        return 1;
    }
    if (value == nullptr)
        throw UsageError(std::string(name) + ": missing value");
    if (name == "--addr")
        o.addr = value;
    else if (name == "--port")
        o.port = parse_port(value);
    else if (name == "--nonce")
        o.nonce = parse_nonce(value);
    else if (name == "--mode") {
        o.plan.measure = parse_measure(value);
        o.mode_given = true;
    } else if (name == "--sizes")
        o.plan.sizes = parse_sizes(value);
    else if (name == "--iters")
        o.plan.max_iters = parse_count(value, "--iters");
    else if (name == "--seconds")
        o.plan.seconds = parse_seconds(value);
    else
        throw UsageError("unknown option '" + std::string(name) + "'");
    return 2;
}

void check_complete(const Options& o)
{
    if (o.role == Role::Settings)
        return;
    if (o.addr.empty())
        throw UsageError("--addr is required");
    if (o.role == Role::Client && (!o.mode_given || o.plan.sizes.empty()))
        throw UsageError("a client needs --mode and --sizes");
}

Options parse_options(int argc, char** argv)
{
    if (argc < 2)
        throw UsageError("missing command");
    Options o;
    o.role = parse_role(argv[1]);
    for (int i = 2; i < argc;)
        i += apply_option(o, argv[i], i + 1 < argc ? argv[i + 1] : nullptr);
    check_complete(o);
    return o;
}

// --- running -------------------------------------------------------------

#ifndef PG_RDMA_BENCH_HAVE_RDMA
[[noreturn]] void no_transport()
{
    throw NoTransport("built without the pg_rdma transport library (transport_dep); "
                      "only --tcp works");
}
#endif

std::unique_ptr<ByteStream> open_server(const Options& o, const Endpoint& ep)
{
    if (o.tcp)
        return tcp_accept_one(ep, kAcceptTimeoutMs);
#ifdef PG_RDMA_BENCH_HAVE_RDMA
    return rdma_accept_one(ep, o.nonce, kAcceptTimeoutMs);
#else
    no_transport();
#endif
}

std::unique_ptr<ByteStream> open_client(const Options& o, const Endpoint& ep)
{
    if (o.tcp)
        return tcp_connect(ep);
#ifdef PG_RDMA_BENCH_HAVE_RDMA
    print_line(rdma_settings_line());
    return rdma_connect(ep, o.nonce);
#else
    no_transport();
#endif
}

void print_settings()
{
#ifdef PG_RDMA_BENCH_HAVE_RDMA
    print_line(rdma_settings_line());
#else
    no_transport();
#endif
}

void run(const Options& o)
{
    if (o.role == Role::Settings) {
        print_settings();
        return;
    }
    const Endpoint ep = parse_endpoint(o.addr, o.port);
    if (o.role == Role::Server) {
        const auto stream = open_server(o, ep);
        stream->set_spin(o.spin);
        run_server(*stream);
        return;
    }
    const auto stream = open_client(o, ep);
    stream->set_spin(o.spin);
    if (o.plan.measure == Measure::Latency)
        print_line("# latency is one-way: round trip / 2, as perftest's ib_write_lat reports it");
    run_client(*stream, o.plan);
    const std::string fields = stream->stats_fields();
    print_line(std::string("stats transport=") + stream->name() + (fields.empty() ? "" : " ") +
               fields);
}

}  // namespace
}  // namespace pg_rdma::perf

int main(int argc, char** argv)
{
    using namespace pg_rdma::perf;
    try {
        run(parse_options(argc, argv));
        return 0;
    } catch (const UsageError& e) {
        std::fprintf(stderr, "transport_bench: %s\n%s", e.what(), kUsage);
        return kExitUsage;
    } catch (const NoTransport& e) {
        std::fprintf(stderr, "transport_bench: %s\n", e.what());
        return kExitNoTransport;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "transport_bench: %s\n", e.what());
        return kExitFailed;
    }
}
