// transport_bench: ping-pong latency and streaming bandwidth between two
// processes, over the pg_rdma transport, (--tcp) plain TCP sockets or
// (--rsocket) librdmacm's rsocket, all running the identical code.
// perf/run-transport-bench.sh runs it in the Soft-RoCE guest next to
// perftest and rstream; perf/README.md explains the figures.
//
//   transport_bench server --addr IP [--port P] [--tcp|--rsocket] [--spin] [--nonce HEX]
//   transport_bench client --addr IP [--port P] [--tcp|--rsocket] [--spin] [--nonce HEX]
//                          --mode latency|bandwidth --sizes N[,N...]
//                          [--iters N] [--seconds S]
//   transport_bench settings
//
// Output, one fact per line (bench_report.hpp):
//   listening transport=rdma port=18600                        (server)
//   settings transport=rdma ... pinned_bytes=397312            (client, rdma)
//   latency transport=rdma wait=poll clock=tsc size=64 iters=.. p50_us=.. p99_us=.. ...
//   bandwidth transport=rdma wait=poll size=4096 messages=.. MiBps=.. ...
//   stats transport=rdma ...                                   (client)
// Latency is one-way: round trip / 2, as perftest's ib_write_lat reports it.
// After EAGAIN both ends wait: a socket in poll() on its fd, an RDMA
// connection in its wait() (an adaptive busy-poll, then poll() on its fd),
// as the server extension and the client library do; an rsocket in rpoll().
// --spin busy-polls instead, as perftest and rstream do: a socket or an
// rsocket retries at once, an RDMA connection's wait() spins up to 100 ms
// before it sleeps.
// Exit status: 0 done, 1 failed, 2 usage, 3 built without the transport.
#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "perf/bench_error.hpp"
#include "perf/bench_options.hpp"
#include "perf/bench_phases.hpp"
#include "perf/bench_report.hpp"
#include "perf/byte_stream.hpp"
#include "perf/endpoint.hpp"
#include "perf/tcp_stream.hpp"
#ifdef PG_RDMA_BENCH_HAVE_RDMA
#include "perf/rdma_stream.hpp"
#include "perf/rsocket_stream.hpp"
#endif

namespace pg_rdma::perf {
namespace {

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitNoTransport = 3;

// A server gives up if no client came within this long (the runner starts
// the client right after "listening"; TCG guests are slow, not this slow).
constexpr int kAcceptTimeoutMs = 60'000;

// Asked for RDMA in a binary built without the transport.
struct NoTransport : BenchError {
    using BenchError::BenchError;
};

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
    if (o.rsocket)
        return rsocket_accept_one(ep, kAcceptTimeoutMs);
    return rdma_accept_one(ep, o.nonce, kAcceptTimeoutMs, o.spin);
#else
    no_transport();
#endif
}

std::unique_ptr<ByteStream> open_client(const Options& o, const Endpoint& ep)
{
    if (o.tcp)
        return tcp_connect(ep);
#ifdef PG_RDMA_BENCH_HAVE_RDMA
    if (o.rsocket)
        return rsocket_connect(ep);
    print_line(rdma_settings_line(o.spin));
    return rdma_connect(ep, o.nonce, o.spin);
#else
    no_transport();
#endif
}

void print_settings()
{
#ifdef PG_RDMA_BENCH_HAVE_RDMA
    print_line(rdma_settings_line(false));
#else
    no_transport();
#endif
}

void print_stats(const ByteStream& stream)
{
    const std::string fields = stream.stats_fields();
    print_line(std::string("stats transport=") + stream.name() + (fields.empty() ? "" : " ") + fields);
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
        // The receiving end of a bandwidth run: how often its waits slept.
        print_stats(*stream);
        return;
    }
    const auto stream = open_client(o, ep);
    stream->set_spin(o.spin);
    if (o.plan.measure == Measure::Latency)
        print_line("# latency is one-way: round trip / 2, as perftest's ib_write_lat reports it");
    run_client(*stream, o.plan);
    print_stats(*stream);
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
