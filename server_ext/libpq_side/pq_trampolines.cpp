// The libpq entry points pg_rdma.so exports for server processes (see
// client_library.hpp): each forwards to libpq_rdma.so's wrapper of the same
// name, or to libpq's own function when the client library is unusable.
// Resolved once per process and name, after the process has decided
// (client_state); never cached in the postmaster, so its children decide
// for themselves.
#include <libpq-fe.h>

#include <atomic>

#include "server_ext/libpq_side/client_library.hpp"
#include "server_ext/libpq_side/outgoing_rows.hpp"

namespace {

// No function-local static with a guard: resolving may log, and a log call
// that longjmps out of a guarded initialisation would leave it pending.
template <typename F>
F resolve(std::atomic<F>& cache, const char* name) noexcept {
    if (F cached = cache.load(std::memory_order_acquire)) return cached;
    const pg_rdma::server::State state = pg_rdma::server::client_state();
    F f = nullptr;
    if (void* ours = pg_rdma::server::client_function(name)) f = reinterpret_cast<F>(ours);
    if (f == nullptr) f = reinterpret_cast<F>(pg_rdma::server::libpq_function(name));
    if (state != pg_rdma::server::State::NotTried) cache.store(f, std::memory_order_release);
    return f;
}

}  // namespace

// A trampoline per name.
#define PG_RDMA_FORWARD(ret, name, params, args)                                \
    extern "C" __attribute__((visibility("default"))) ret name params {        \
        static constinit std::atomic<ret(*) params> cache{nullptr};             \
        return resolve(cache, #name) args;                                      \
    }

// The same for a call that starts a connection or hands out options a
// proxy check will read: libraries loaded since the last one get their
// check taught with_rsocket first.
#define PG_RDMA_FORWARD_CHECKED(ret, name, params, args)                        \
    extern "C" __attribute__((visibility("default"))) ret name params {        \
        static constinit std::atomic<ret(*) params> cache{nullptr};             \
        const auto target = resolve(cache, #name);                              \
        pg_rdma::server::allow_with_rsocket_in_proxy_checks();                  \
        return target args;                                                     \
    }

// A blocking connect, whose connection gets its pg_stat_rdma_outgoing row
// at once (its own polling may not pass through PQconnectPoll's trampoline).
#define PG_RDMA_FORWARD_CONNECT(name, params, args)                             \
    extern "C" __attribute__((visibility("default"))) PGconn* name params {    \
        static constinit std::atomic<PGconn*(*) params> cache{nullptr};         \
        const auto target = resolve(cache, #name);                              \
        pg_rdma::server::allow_with_rsocket_in_proxy_checks();                  \
        PGconn* const conn = target args;                                       \
        pg_rdma::server::note_connection_made(conn);                            \
        return conn;                                                            \
    }

PG_RDMA_FORWARD_CONNECT(PQconnectdb, (const char* conninfo), (conninfo))
PG_RDMA_FORWARD_CONNECT(PQconnectdbParams, (const char* const* k, const char* const* v, int e), (k, v, e))
PG_RDMA_FORWARD_CHECKED(PGconn*, PQconnectStart, (const char* conninfo), (conninfo))
PG_RDMA_FORWARD_CHECKED(PGconn*, PQconnectStartParams, (const char* const* k, const char* const* v, int e), (k, v, e))
PG_RDMA_FORWARD_CONNECT(PQsetdbLogin,
                (const char* h, const char* p, const char* o, const char* t, const char* d, const char* l,
                 const char* w),
                (h, p, o, t, d, l, w))

// The non-blocking connect's end (walreceiver, dblink, postgres_fdw poll
// PQconnectPoll until it says OK) claims the row; PQfinish gives it back.
extern "C" __attribute__((visibility("default"))) PostgresPollingStatusType PQconnectPoll(PGconn* conn) {
    static constinit std::atomic<PostgresPollingStatusType (*)(PGconn*)> cache{nullptr};
    const PostgresPollingStatusType status = resolve(cache, "PQconnectPoll")(conn);
    if (status == PGRES_POLLING_OK) pg_rdma::server::note_connection_made(conn);
    return status;
}

extern "C" __attribute__((visibility("default"))) void PQfinish(PGconn* conn) {
    static constinit std::atomic<void (*)(PGconn*)> cache{nullptr};
    pg_rdma::server::note_connection_finished(conn);
    resolve(cache, "PQfinish")(conn);
}
PG_RDMA_FORWARD_CHECKED(PQconninfoOption*, PQconninfoParse, (const char* conninfo, char** errmsg), (conninfo, errmsg))
PG_RDMA_FORWARD_CHECKED(PQconninfoOption*, PQconndefaults, (void), ())
PG_RDMA_FORWARD(PQconninfoOption*, PQconninfo, (PGconn * conn), (conn))
