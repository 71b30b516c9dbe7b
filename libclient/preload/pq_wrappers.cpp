// The PQconnect* family as libpq_rdma.so exports it: with_rsocket is taken
// out of what libpq sees (libpq 15 rejects keywords it does not know), its
// policy (connection > service section > WITH_RSOCKET) is remembered for the
// PGconn (conn_policy.hpp), and PQconnectPoll drives the upgrade of each
// attempt's socket (upgrade_driver.hpp). The service file's with_rsocket
// lines are hidden from libpq while the real call runs (service_files.hpp).
// Every body catches everything: nothing may unwind into a C caller (the
// declarations are libpq-fe.h's, so they cannot say noexcept).
#include <libpq-fe.h>

#include <string>

#include "libclient/conninfo/connection_string.hpp"
#include "libclient/conninfo/keyword_arrays.hpp"
#include "libclient/conninfo/precedence.hpp"
#include "libclient/preload/conn_policy.hpp"
#include "libclient/preload/conninfo_options.hpp"
#include "libclient/preload/driver_policy.hpp"
#include "libclient/preload/inherited_session.hpp"
#include "libclient/preload/libpq_calls.hpp"
#include "libclient/preload/pq_messages.hpp"
#include "libclient/preload/service_files.hpp"
#include "libclient/preload/socket_table.hpp"
#include "libclient/preload/upgrade_driver.hpp"

namespace pg_rdma::client {
namespace {

// What a wrapper learned from the connection's parameters.
struct Request {
    conninfo::ResolvedPolicy resolved;
    std::string error;  // set: fail the PGconn with it, do not connect
};

// `service`: the service the connection names itself (service_in_*); the
// section of PGSERVICE's is read when it names none. `services` is the
// scope the real call then runs in.
Request resolve(ServiceFileScope& services, const std::optional<std::string>& connection_value,
                const std::optional<std::string>& service) {
    conninfo::PolicyInputs inputs;
    inputs.connection = connection_value;
    // Read only when it could win.
    if (!connection_value) inputs.service = services.section_value(service);
    inputs.environment = conninfo::environment_value();
    Request request;
    request.resolved = conninfo::resolve_policy(inputs);
    if (!request.resolved.ok()) request.error = request.resolved.error;
    return request;
}

// Runs `start` (the real call, given the rewritten input) under the policy.
template <typename Start>
PGconn* start_with(const Request& request, Start&& start) {
    if (!request.error.empty()) return failed_connection(request.error);
    const PolicyChoice choice{request.resolved.policy, request.resolved.value,
                              request.resolved.source == conninfo::PolicySource::Default ||
                                  request.resolved.source == conninfo::PolicySource::Environment};
    StartScope scope(choice);
    return start();
}

PGconn* connect_string(const char* conninfo, PGconn* (*real)(const char*)) {
    try {
        if (conninfo == nullptr || StartScope::active()) return real(conninfo);
        const conninfo::Extraction ex = conninfo::extract_from_connection_string(conninfo);
        if (ex.status == conninfo::ExtractStatus::SyntaxError) return real(conninfo);
        ServiceFileScope services;
        return start_with(resolve(services, ex.value, service_in_string(ex.rewritten.c_str())),
                          [&] { return real(ex.rewritten.c_str()); });
    } catch (...) {
        return failed_connection("out of memory\n");
    }
}

PGconn* connect_arrays(const char* const* keywords, const char* const* values, int expand_dbname,
                       PGconn* (*real)(const char* const*, const char* const*, int)) {
    try {
        if (keywords == nullptr || values == nullptr || StartScope::active())
            return real(keywords, values, expand_dbname);
        const conninfo::ArraysExtraction ex =
            conninfo::extract_from_keyword_arrays(keywords, values, expand_dbname != 0);
        if (ex.status == conninfo::ExtractStatus::SyntaxError) return real(keywords, values, expand_dbname);
        ServiceFileScope services;
        return start_with(
            resolve(services, ex.value,
                    service_in_arrays(ex.arrays.keywords(), ex.arrays.values(), expand_dbname != 0)),
            [&] { return real(ex.arrays.keywords(), ex.arrays.values(), expand_dbname); });
    } catch (...) {
        return failed_connection("out of memory\n");
    }
}

}  // namespace
}  // namespace pg_rdma::client

using namespace pg_rdma::client;

namespace {

// `pq`: the libpq of the code that called the wrapper running now
// (libpq_for its return address). nullptr when none can be found: the
// wrapper then fails as libpq fails for lack of memory, and says why once;
// a crash is never the answer.
const LibpqCalls* usable(const LibpqCalls* pq, const char* function) noexcept {
    static std::atomic<bool> said_none{false};
    static std::atomic<bool> said_incomplete{false};
    if (pq == nullptr) {
        warn_libpq_once(said_none, function, ": no libpq defining it is loaded for this caller; the call fails\n");
        return nullptr;
    }
    if (!pq->complete)
        warn_libpq_once(said_incomplete, function, ": this program's libpq lacks functions libpq_rdma.so needs; with_rsocket "
                                  "is not available to it and its connections are plain libpq's\n");
    return pq;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) PGconn* PQconnectdb(const char* conninfo) {
    const LibpqCalls* pq = usable(libpq_for(__builtin_return_address(0)), "PQconnectdb");
    if (pq == nullptr) return nullptr;
    if (!pq->complete) return pq->PQconnectdb(conninfo);
    LibpqScope scope(*pq);
    return connect_string(conninfo, pq->PQconnectdb);
}

__attribute__((visibility("default"))) PGconn* PQconnectStart(const char* conninfo) {
    const LibpqCalls* pq = usable(libpq_for(__builtin_return_address(0)), "PQconnectStart");
    if (pq == nullptr || pq->PQconnectStart == nullptr) return nullptr;
    if (!pq->complete) return pq->PQconnectStart(conninfo);
    LibpqScope scope(*pq);
    return connect_string(conninfo, pq->PQconnectStart);
}

__attribute__((visibility("default"))) PGconn* PQconnectdbParams(const char* const* keywords,
                                                                 const char* const* values,
                                                                 int expand_dbname) {
    const LibpqCalls* pq = usable(libpq_for(__builtin_return_address(0)), "PQconnectdbParams");
    if (pq == nullptr || pq->PQconnectdbParams == nullptr) return nullptr;
    if (!pq->complete) return pq->PQconnectdbParams(keywords, values, expand_dbname);
    LibpqScope scope(*pq);
    return connect_arrays(keywords, values, expand_dbname, pq->PQconnectdbParams);
}

__attribute__((visibility("default"))) PGconn* PQconnectStartParams(const char* const* keywords,
                                                                    const char* const* values,
                                                                    int expand_dbname) {
    const LibpqCalls* pq = usable(libpq_for(__builtin_return_address(0)), "PQconnectStartParams");
    if (pq == nullptr || pq->PQconnectStartParams == nullptr) return nullptr;
    if (!pq->complete) return pq->PQconnectStartParams(keywords, values, expand_dbname);
    LibpqScope scope(*pq);
    return connect_arrays(keywords, values, expand_dbname, pq->PQconnectStartParams);
}

// dbName may be a connection string (libpq: when it contains '=' or is a URI).
__attribute__((visibility("default"))) PGconn* PQsetdbLogin(const char* pghost, const char* pgport,
                                                            const char* pgoptions, const char* pgtty,
                                                            const char* dbName, const char* login,
                                                            const char* pwd) {
    const LibpqCalls* pq = usable(libpq_for(__builtin_return_address(0)), "PQsetdbLogin");
    if (pq == nullptr || pq->PQsetdbLogin == nullptr) return nullptr;
    const auto real = pq->PQsetdbLogin;
    if (!pq->complete) return real(pghost, pgport, pgoptions, pgtty, dbName, login, pwd);
    LibpqScope scope(*pq);
    try {
        if (StartScope::active()) return real(pghost, pgport, pgoptions, pgtty, dbName, login, pwd);
        std::optional<std::string> value;
        std::optional<std::string> service;
        std::string rewritten;
        const char* db = dbName;
        if (dbName != nullptr && pg_rdma::conninfo::is_recognized_connection_string(dbName)) {
            auto ex = pg_rdma::conninfo::extract_from_connection_string(dbName);
            if (ex.status == pg_rdma::conninfo::ExtractStatus::Ok) {
                value = std::move(ex.value);
                rewritten = std::move(ex.rewritten);
                db = rewritten.c_str();
                service = service_in_string(db);
            }
        }
        ServiceFileScope services;
        return start_with(resolve(services, value, service),
                          [&] { return real(pghost, pgport, pgoptions, pgtty, db, login, pwd); });
    } catch (...) {
        return failed_connection("out of memory\n");
    }
}

__attribute__((visibility("default"))) PostgresPollingStatusType PQconnectPoll(PGconn* conn) {
    const LibpqCalls* pq = usable(libpq_for(__builtin_return_address(0)), "PQconnectPoll");
    if (pq == nullptr || pq->PQconnectPoll == nullptr) return PGRES_POLLING_FAILED;
    const auto real = pq->PQconnectPoll;
    if (!pq->complete) return real(conn);
    LibpqScope scope(*pq);
    try {
        const std::optional<PolicyChoice> choice = conn != nullptr ? choice_of(conn) : std::nullopt;
        // Started around our wrappers: its sockets are judged at their first write.
        if (!choice) return real(conn);
        const RsocketPolicy policy = choice->policy;
        const bool servers_file = choice->servers_file_decides && servers_file_has_rules();
        if (policy == RsocketPolicy::Off && !servers_file) {
            // Still our attempt: its sockets are not left to the first-write path.
            ActivePolicy active(policy);
            return real(conn);
        }
        std::string failure;
        const int fd = pq->PQsocket(conn);
        // CONNECTION_NEEDED here: libpq's connect_timeout expired and it is
        // giving up this address (it closes the socket, and the upgrade
        // with it, then tries the next or fails). Holding it back would
        // spin its loop on an expired deadline.
        const bool abandoning = pq->PQstatus(conn) == CONNECTION_NEEDED;
        if (const EntryRef entry = SocketTable::instance().find(fd)) {
            if (abandoning) failure = abandoned_by_libpq(*entry);
            else if (auto answer = drive(conn, fd, *entry, failure)) return *answer;
        }
        PostgresPollingStatusType status;
        const char* refusal = nullptr;
        {
            ActivePolicy active(policy, servers_file);
            status = real(conn);
            refusal = ActivePolicy::refusal();
        }
        // A servers file rule chose for this attempt: what it chose, for
        // PQrdmaAttribute(conn, "requested").
        if (servers_file)
            if (const EntryRef made = SocketTable::instance().find(pq->PQsocket(conn)))
                note_rule(conn, made->mode == pg_rdma::transport::Mode::Require ? "require" : "true");
        if (!failure.empty()) append_error(conn, failure);
        if (refusal != nullptr) append_error(conn, refusal);
        return status;
    } catch (...) {
        return real(conn);
    }
}

// libpq does not validate option values here (sslmode=maybe parses), and
// neither is with_rsocket's: it is reported as written, the last one winning.
__attribute__((visibility("default"))) PQconninfoOption* PQconninfoParse(const char* conninfo, char** errmsg) {
    const LibpqCalls* pq = usable(libpq_for(__builtin_return_address(0)), "PQconninfoParse");
    if (pq == nullptr || pq->PQconninfoParse == nullptr) return nullptr;
    const auto real = pq->PQconninfoParse;
    if (!pq->complete) return real(conninfo, errmsg);
    LibpqScope scope(*pq);
    try {
        if (conninfo == nullptr) return real(conninfo, errmsg);
        const auto ex = pg_rdma::conninfo::extract_from_connection_string(conninfo);
        if (ex.status == pg_rdma::conninfo::ExtractStatus::SyntaxError) return real(conninfo, errmsg);
        return with_rsocket_option(real(ex.rewritten.c_str(), errmsg), ex.value);
    } catch (...) {
        return real(conninfo, errmsg);
    }
}

// What a connection made now would default to: PGSERVICE's section, then
// WITH_RSOCKET (libpq's defaults include the service file and environment).
__attribute__((visibility("default"))) PQconninfoOption* PQconndefaults(void) {
    const LibpqCalls* pq = usable(libpq_for(__builtin_return_address(0)), "PQconndefaults");
    if (pq == nullptr || pq->PQconndefaults == nullptr) return nullptr;
    const auto real = pq->PQconndefaults;
    if (!pq->complete) return real();
    LibpqScope scope(*pq);
    PQconninfoOption* options = nullptr;
    try {
        ServiceFileScope services;
        pg_rdma::conninfo::PolicyInputs inputs;
        inputs.service = services.section_value(std::nullopt);
        inputs.environment = pg_rdma::conninfo::environment_value();
        const auto value = pg_rdma::conninfo::resolve_policy(inputs).value;
        options = real();
        return with_rsocket_option(options, value);
    } catch (...) {
        return options != nullptr ? options : real();
    }
}

// For a connection that asked for RDMA, the value that decided, wherever it
// was written (WITH_RSOCKET included, as Postgres Pro documents for
// pg_basebackup -R), so that pg_basebackup -R keeps with_rsocket in
// primary_conninfo and psql's \connect keeps it for the next connection.
// A false value is not reported: it means plain libpq, which a
// primary_conninfo read by a server without pg_rdma must stay.
__attribute__((visibility("default"))) PQconninfoOption* PQconninfo(PGconn* conn) {
    const LibpqCalls* pq = usable(libpq_for(__builtin_return_address(0)), "PQconninfo");
    if (pq == nullptr || pq->PQconninfo == nullptr) return nullptr;
    const auto real = pq->PQconninfo;
    if (!pq->complete) return real(conn);
    LibpqScope scope(*pq);
    PQconninfoOption* options = nullptr;
    try {
        options = real(conn);
        return conn != nullptr ? with_rsocket_option(options, value_of(conn)) : options;
    } catch (...) {
        return options;
    }
}

__attribute__((visibility("default"))) void PQfinish(PGconn* conn) {
    const LibpqCalls* pq = usable(libpq_for(__builtin_return_address(0)), "PQfinish");
    if (pq == nullptr || pq->PQfinish == nullptr) return;
    if (!pq->complete) return pq->PQfinish(conn);
    LibpqScope scope(*pq);
    if (conn != nullptr) forget(conn);
    const LettingGo finishing;
    pq->PQfinish(conn);
}

}  // extern "C"
