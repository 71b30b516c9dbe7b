// The libpq entry points pg_rdma.so exports for server processes (see
// client_library.hpp): each forwards to libpq_rdma.so's wrapper of the same
// name, or to libpq's own function when the client library is unusable.
// Resolved once per process and name; a fork inherits the answers, which
// stay right in the child (same libraries, same addresses).
#include <libpq-fe.h>

#include "server_ext/libpq_side/client_library.hpp"

namespace {

template <typename F>
F resolve(const char* name) noexcept {
    if (void* f = pg_rdma::server::client_function(name)) return reinterpret_cast<F>(f);
    return reinterpret_cast<F>(pg_rdma::server::libpq_function(name));
}

}  // namespace

// A trampoline per name: the function-local static is resolved on first use.
#define PG_RDMA_FORWARD(ret, name, params, args)                                \
    extern "C" __attribute__((visibility("default"))) ret name params {        \
        static const auto target = resolve<ret(*) params>(#name);               \
        return target args;                                                     \
    }

// The same for a call that starts a connection or hands out options a
// proxy check will read: libraries loaded since the last one get their
// check taught with_rsocket first.
#define PG_RDMA_FORWARD_CHECKED(ret, name, params, args)                        \
    extern "C" __attribute__((visibility("default"))) ret name params {        \
        static const auto target = resolve<ret(*) params>(#name);               \
        pg_rdma::server::allow_with_rsocket_in_proxy_checks();                  \
        return target args;                                                     \
    }

PG_RDMA_FORWARD_CHECKED(PGconn*, PQconnectdb, (const char* conninfo), (conninfo))
PG_RDMA_FORWARD_CHECKED(PGconn*, PQconnectdbParams, (const char* const* k, const char* const* v, int e), (k, v, e))
PG_RDMA_FORWARD_CHECKED(PGconn*, PQconnectStart, (const char* conninfo), (conninfo))
PG_RDMA_FORWARD_CHECKED(PGconn*, PQconnectStartParams, (const char* const* k, const char* const* v, int e), (k, v, e))
PG_RDMA_FORWARD_CHECKED(PGconn*, PQsetdbLogin,
                (const char* h, const char* p, const char* o, const char* t, const char* d, const char* l,
                 const char* w),
                (h, p, o, t, d, l, w))
PG_RDMA_FORWARD(PostgresPollingStatusType, PQconnectPoll, (PGconn * conn), (conn))
PG_RDMA_FORWARD(void, PQfinish, (PGconn * conn), (conn))
PG_RDMA_FORWARD_CHECKED(PQconninfoOption*, PQconninfoParse, (const char* conninfo, char** errmsg), (conninfo, errmsg))
PG_RDMA_FORWARD_CHECKED(PQconninfoOption*, PQconndefaults, (void), ())
PG_RDMA_FORWARD(PQconninfoOption*, PQconninfo, (PGconn * conn), (conn))
