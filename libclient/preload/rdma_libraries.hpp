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
// lookup: `perl -e 1` ran 4.33 M instructions with them, 1.67 M without, 1.41 M
// with no preload at all (perf/README.md,
// "What a session costs the client"). And on a host without rdma-core's
// libraries the preload itself could not load: the dynamic loader printed
// an error at every program's start and went on without it (so
// `with_rsocket` was an unknown option to libpq), or, with a damaged
// library, stopped the program. Now such a session falls back to TCP
// (true) or fails saying what to install (require).
//
// The transport calls these functions by their usual names: this library
// defines each one (rdma_libraries.cpp, hidden by exports.map) as a
// forwarder to the real function, found on the first call. Inline verbs
// calls on the data path (posting, polling) go through the device context,
// not through here.
#pragma once

namespace pg_rdma::client {

// nullptr once librdmacm and libibverbs are loaded and every function this
// library forwards to was found; otherwise why not, in words for an error
// message, the same on every call. Loads them on the first call; thread-safe.
const char* rdma_libraries_problem() noexcept;

}  // namespace pg_rdma::client
