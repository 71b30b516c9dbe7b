// libpq's own definitions of the functions this library wraps or uses,
// found in libpq.so.5 itself (not through the global scope, where our
// wrappers come first). libpq is loaded by the program that calls a
// wrapper, so they are looked up on first use; a missing one is a broken
// installation and aborts with a message.
#pragma once

#include <libpq-fe.h>

#include <cstddef>

namespace pg_rdma::client {

// libpq's PQExpBufferData (pqexpbuffer.h, a stable public struct of libpq's
// exported buffer functions; its header is only in the server's internal dir).
struct ExpBuffer {
    char* data;
    std::size_t len;
    std::size_t maxlen;
};

struct LibpqCalls {
    PGconn* (*PQconnectdb)(const char*);
    PGconn* (*PQconnectdbParams)(const char* const*, const char* const*, int);
    PGconn* (*PQconnectStart)(const char*);
    PGconn* (*PQconnectStartParams)(const char* const*, const char* const*, int);
    PGconn* (*PQsetdbLogin)(const char*, const char*, const char*, const char*, const char*, const char*,
                            const char*);
    PostgresPollingStatusType (*PQconnectPoll)(PGconn*);
    void (*PQfinish)(PGconn*);
    int (*PQsocket)(const PGconn*);
    ConnStatusType (*PQstatus)(const PGconn*);
    char* (*PQerrorMessage)(const PGconn*);
    char* (*PQhost)(const PGconn*);
    char* (*PQport)(const PGconn*);
    PQconninfoOption* (*PQconninfo)(PGconn*);
    PQconninfoOption* (*PQconninfoParse)(const char*, char**);
    PQconninfoOption* (*PQconndefaults)();
    void (*PQconninfoFree)(PQconninfoOption*);
    void (*resetPQExpBuffer)(ExpBuffer*);
    void (*appendPQExpBufferStr)(ExpBuffer*, const char*);
};

const LibpqCalls& libpq() noexcept;

}  // namespace pg_rdma::client
