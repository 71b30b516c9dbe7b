// What the client and server of transport_bench say to each other, and the
// two measurements built on it. Identical for TCP and RDMA: both only see a
// ByteStream.
//
// The client drives a sequence of phases on one connection; each starts with
// a 16-byte header (host byte order: both ends are this binary on one host):
//   0  u32  kind: 0 done, 1 latency, 2 bandwidth
//   4  u32  message size in bytes, 1..kMaxMessageSize
//   8  u64  message count, 1..kMaxMessageCount
// latency:   count times: client writes `size` bytes, server reads them and
//            writes `size` bytes back, client reads them (ping-pong).
// bandwidth: client writes count x size bytes back to back; once it has read
//            them all the server writes one ack byte, so the client's clock
//            stops only when every byte was delivered, not merely queued.
// done:      the server closes; the client reads until end of stream.
// One measurement is a warm-up phase and then phases of about a quarter of a
// second each, sized from the rate of the one before, until the time budget
// is spent: a guest that turns slow halfway overruns by one phase at most.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "perf/byte_stream.hpp"

namespace pg_rdma::perf {

inline constexpr std::size_t kMaxMessageSize = 16u << 20;       // bytes, caps the peer's header
inline constexpr std::uint64_t kMaxMessageCount = 100'000'000;  // caps the peer's header

enum class Measure { Latency, Bandwidth };

struct ClientPlan {
    Measure measure = Measure::Latency;
    std::vector<std::size_t> sizes;   // bytes per message, one measurement each
    std::uint64_t max_iters = 1'000;  // latency: measured round trips per size, at most
    double seconds = 2.0;             // time budget per size (s), after warm-up;
                                      // latency still takes 100 round trips at least
};

// Runs every size of `plan` and prints one result line per size on stdout.
void run_client(ByteStream& stream, const ClientPlan& plan);
// Answers phases until the client says done or closes.
void run_server(ByteStream& stream);

}  // namespace pg_rdma::perf
