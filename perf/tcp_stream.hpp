// Plain TCP sockets as a ByteStream: the "TCP" reference of the benchmark,
// running the identical phase code as the RDMA transport.
#pragma once

#include <memory>

#include "perf/byte_stream.hpp"
#include "perf/endpoint.hpp"

namespace pg_rdma::perf {

// Listens on `at`, prints "listening transport=tcp port=N", accepts one
// client (waiting at most `accept_timeout_ms`) and stops listening.
std::unique_ptr<ByteStream> tcp_accept_one(const Endpoint& at, int accept_timeout_ms);
std::unique_ptr<ByteStream> tcp_connect(const Endpoint& to);

}  // namespace pg_rdma::perf
