// The pg_rdma transport (transport/) as a ByteStream: the figures labelled
// "ours". Built only when the transport library is (perf/meson.build).
#pragma once

#include <memory>
#include <string>

#include "perf/byte_stream.hpp"
#include "perf/endpoint.hpp"
#include "protocol/upgrade.hpp"

namespace pg_rdma::perf {

// Listens with rdma_cm on `at`, prints "listening transport=rdma port=N",
// accepts one client presenting `nonce` (its connection and handshake done
// within `accept_timeout_ms`) and stops listening. `spin`: the connection's
// wait() busy-polls up to the transport's maximum (100 ms) before sleeping,
// instead of its default adaptive spin.
std::unique_ptr<ByteStream> rdma_accept_one(const Endpoint& at, const protocol::Nonce& nonce,
                                            int accept_timeout_ms, bool spin);
std::unique_ptr<ByteStream> rdma_connect(const Endpoint& to, const protocol::Nonce& nonce, bool spin);

// "settings ..." line: the transport's Settings the benchmark uses (the
// defaults; with `spin`, the longest busy-poll) and the memory they pin per
// connection.
std::string rdma_settings_line(bool spin);

}  // namespace pg_rdma::perf
