// The parent's half of a connection a forked child took over
// (fork_handover.hpp): copies bytes between the child's socket and the
// Stream until the session ends, in a thread of its own.
#pragma once

#include <memory>

namespace pg_rdma::transport {

class Stream;

// Runs until the child closes its socket (then the Stream is closed in
// order, its last bytes drained as close() drains them) or the Stream ends
// (EOF: the socket is shut down for writing, so the child reads EOF;
// failure: the socket is closed, so the child sees the session end).
// Closes `sock` and destroys the Stream before returning. Blocking.
void relay_stream(std::unique_ptr<Stream> stream, int sock) noexcept;

}  // namespace pg_rdma::transport
