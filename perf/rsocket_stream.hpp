// librdmacm's rsocket as a ByteStream: the reference "rsocket" measured by
// the same ping-pong and streaming code as ours and TCP, so that its p50
// and average come from the same loop, timed the same way (rstream, the
// rsocket benchmark, times only whole runs and reports an average). Built
// with the transport library (perf/meson.build): both need librdmacm.
#pragma once

#include <memory>

#include "perf/byte_stream.hpp"
#include "perf/endpoint.hpp"

namespace pg_rdma::perf {

// Set up as rstream sets up its sockets: 512 KiB send and receive buffers,
// TCP_NODELAY, non-blocking calls and the library's default inline size.
// Waiting (when not spinning) is rsocket's own rpoll(): it busy-polls for
// the library's polling_time, then sleeps on the completion channel; it is
// never given a timeout (rsocket_stream.cpp says why), so such a wait has
// no slice after which the benchmark looks again.
// Listens on `at`, prints "listening transport=rsocket port=N", accepts
// one client (waiting at most `accept_timeout_ms`) and stops listening.
std::unique_ptr<ByteStream> rsocket_accept_one(const Endpoint& at, int accept_timeout_ms);
std::unique_ptr<ByteStream> rsocket_connect(const Endpoint& to);

}  // namespace pg_rdma::perf
