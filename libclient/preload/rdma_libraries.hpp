// rdma-core's libraries (librdmacm and libibverbs, and through them libnl
// and every provider), loaded on a session's first use of RDMA instead of
// with libpq_rdma.so.
//
// Why: the preload goes into every process of a command run under it
// (`pgrdma psql` is Debian's perl wrapper, then psql; a script under pgrdma
// runs every tool it calls with it), and most of them never ask for RDMA.
// Linked, those libraries and their dependencies were relocated at every
// process's start, each symbol looked up through the whole global scope,
// and they sat in front of the program's own libraries in every later
// lookup: `perl -e 1` ran 4.33 M instructions with them and the shared
// libstdc++ and libfmt, 1.67 M now (libstdc++ is linked in, fmt
// header-only), 1.41 M with no preload at all (perf/FINDINGS-archive.md, "What a
// session costs the client"). And on a host without rdma-core's
// libraries the preload itself could not load: the dynamic loader printed
// an error at every program's start and went on without it (so
// `with_rsocket` was an unknown option to libpq), or, with a damaged
// library, stopped the program. Now such a session falls back to TCP
// (true) or fails saying what to install (require).
//
// The transport calls these functions by their usual names: this library
// defines each one (rdma_libraries.cpp, hidden by exports.map) as a
// forwarder to the real function, found on the first call. The preload is
// linked without rdma-core (transport_forwarded_dep), so a call the table
// lacks fails the link by name. Posting and polling are inline verbs calls
// through the device context, not through here; taking and acknowledging a
// completion event after a sleep (ibv_get_cq_event, ibv_ack_cq_events) are
// forwarded, one indirect call more per wakeup.
#pragma once

#include <span>

namespace pg_rdma::client {

// nullptr once librdmacm and libibverbs are loaded and every function this
// library forwards to was found; otherwise why not, in words for an error
// message, the same on every call. Loads them on the first call;
// thread-safe, and a fork() waits for a load in progress.
const char* rdma_libraries_problem() noexcept;

// The functions forwarded, each with the symbol version it is looked up in
// (the one a link against the library would bind: its default).
struct ForwardedFunction {
    const char* soname;
    const char* name;
    const char* version;
};
std::span<const ForwardedFunction> forwarded_functions() noexcept;

}  // namespace pg_rdma::client
