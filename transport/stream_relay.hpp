// The parent's half of a connection a forked child took over
// (fork_handover.hpp): copies bytes between the child's socket and the
// Stream until the session ends, in a thread of its own.
#pragma once

#include <memory>

namespace pg_rdma::transport {

class Stream;

// Runs until both directions are over, each ending as over TCP: the child
// shutting down or closing its side becomes the Stream's Close after its
// last byte; the server's EOF, or the Stream's failure, becomes EOF on the
// socket after every byte that arrived before it. Then closes the Stream in
// order (unless it failed), ends `sock` and returns. Blocking.
void relay_stream(std::unique_ptr<Stream> stream, int sock) noexcept;

}  // namespace pg_rdma::transport
