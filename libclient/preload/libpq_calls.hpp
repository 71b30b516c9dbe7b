// libpq's own definitions of the functions this library wraps or uses.
//
// Which libpq: the one the calling code's own calls would reach if this
// library were not there, as the dynamic linker binds them: the next
// definition in the global scope (libpq.so.5 for a program linked with
// it), else the one among the calling object's own dependencies (a module
// loaded with RTLD_LOCAL, such as a binary Python wheel's, with its own
// renamed copy), else, last, a libpq.so.5 loaded anywhere. Each copy found
// is resolved once and kept; several may be in one process, and each
// wrapper uses its caller's, so PGconns never cross copies.
//
// Nothing here aborts: a caller for which no libpq can be found gets the
// wrapper's failure value and a message on stderr, once.
#pragma once

#include <libpq-fe.h>

#include <atomic>
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
    // Every entry above was found: with_rsocket can be handled. When false,
    // the wrappers only forward to what was found (and say so once).
    bool complete;
};

// The libpq for a wrapper called from `caller` (its return address), or
// nullptr when no loaded object defines PQconnectdb for it.
const LibpqCalls* libpq_for(const void* caller) noexcept;

// While a wrapper runs: the libpq that libpq() means on this thread.
class LibpqScope {
public:
    explicit LibpqScope(const LibpqCalls& calls) noexcept;
    ~LibpqScope();
    LibpqScope(const LibpqScope&) = delete;
    LibpqScope& operator=(const LibpqScope&) = delete;

private:
    const LibpqCalls* previous_;
};

// The innermost LibpqScope's libpq (every exported wrapper opens one before
// anything below it calls libpq).
const LibpqCalls& libpq() noexcept;

// Says on stderr, the first time `said` is set, that `function` was called
// where no libpq (or no complete one) could be found; `what` is the rest
// of the sentence.
void warn_libpq_once(std::atomic<bool>& said, const char* function, const char* what) noexcept;

}  // namespace pg_rdma::client
