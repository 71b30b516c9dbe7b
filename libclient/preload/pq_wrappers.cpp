// The PQconnect* family as libpq_rdma.so exports it: with_rsocket is taken
// out of what libpq sees (libpq 15 rejects keywords it does not know), its
// policy is remembered for the PGconn (conn_policy.hpp), and PQconnectPoll
// drives the upgrade of each attempt's socket (upgrade_driver.hpp).
// Every body catches everything: nothing may unwind into a C caller (the
// declarations are libpq-fe.h's, so they cannot say noexcept).
#include <libpq-fe.h>

#include <string>

#include "libclient/conninfo/connection_string.hpp"
#include "libclient/conninfo/keyword_arrays.hpp"
#include "libclient/conninfo/precedence.hpp"
#include "libclient/preload/conn_policy.hpp"
#include "libclient/preload/libpq_calls.hpp"
#include "libclient/preload/pq_messages.hpp"
#include "libclient/preload/socket_table.hpp"
#include "libclient/preload/upgrade_driver.hpp"

namespace pg_rdma::client {
namespace {

// What a wrapper learned from the connection's parameters.
struct Request {
    conninfo::ResolvedPolicy resolved;
    std::string error;  // set: fail the PGconn with it, do not connect
};

Request resolve(const std::optional<std::string>& connection_value) {
    conninfo::PolicyInputs inputs;
    inputs.connection = connection_value;
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
    StartScope scope(request.resolved.policy);
    return start();
}

PGconn* connect_string(const char* conninfo, PGconn* (*real)(const char*)) {
    try {
        if (conninfo == nullptr || StartScope::active()) return real(conninfo);
        const conninfo::Extraction ex = conninfo::extract_from_connection_string(conninfo);
        if (ex.status == conninfo::ExtractStatus::SyntaxError) return real(conninfo);
        return start_with(resolve(ex.value), [&] { return real(ex.rewritten.c_str()); });
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
        return start_with(resolve(ex.value),
                          [&] { return real(ex.arrays.keywords(), ex.arrays.values(), expand_dbname); });
    } catch (...) {
        return failed_connection("out of memory\n");
    }
}

}  // namespace
}  // namespace pg_rdma::client

using namespace pg_rdma::client;

extern "C" {

__attribute__((visibility("default"))) PGconn* PQconnectdb(const char* conninfo) {
    return connect_string(conninfo, libpq().PQconnectdb);
}

__attribute__((visibility("default"))) PGconn* PQconnectStart(const char* conninfo) {
    return connect_string(conninfo, libpq().PQconnectStart);
}

__attribute__((visibility("default"))) PGconn* PQconnectdbParams(const char* const* keywords,
                                                                 const char* const* values,
                                                                 int expand_dbname) {
    return connect_arrays(keywords, values, expand_dbname, libpq().PQconnectdbParams);
}

__attribute__((visibility("default"))) PGconn* PQconnectStartParams(const char* const* keywords,
                                                                    const char* const* values,
                                                                    int expand_dbname) {
    return connect_arrays(keywords, values, expand_dbname, libpq().PQconnectStartParams);
}

// dbName may be a connection string (libpq: when it contains '=' or is a URI).
__attribute__((visibility("default"))) PGconn* PQsetdbLogin(const char* pghost, const char* pgport,
                                                            const char* pgoptions, const char* pgtty,
                                                            const char* dbName, const char* login,
                                                            const char* pwd) {
    const auto real = libpq().PQsetdbLogin;
    try {
        if (StartScope::active()) return real(pghost, pgport, pgoptions, pgtty, dbName, login, pwd);
        std::optional<std::string> value;
        std::string rewritten;
        const char* db = dbName;
        if (dbName != nullptr && pg_rdma::conninfo::is_recognized_connection_string(dbName)) {
            auto ex = pg_rdma::conninfo::extract_from_connection_string(dbName);
            if (ex.status == pg_rdma::conninfo::ExtractStatus::Ok) {
                value = std::move(ex.value);
                rewritten = std::move(ex.rewritten);
                db = rewritten.c_str();
            }
        }
        return start_with(resolve(value), [&] { return real(pghost, pgport, pgoptions, pgtty, db, login, pwd); });
    } catch (...) {
        return failed_connection("out of memory\n");
    }
}

__attribute__((visibility("default"))) PostgresPollingStatusType PQconnectPoll(PGconn* conn) {
    const auto real = libpq().PQconnectPoll;
    try {
        const RsocketPolicy policy = conn != nullptr ? policy_of(conn) : RsocketPolicy::Off;
        if (policy == RsocketPolicy::Off) return real(conn);
        std::string failure;
        const int fd = libpq().PQsocket(conn);
        if (SocketEntry* entry = SocketTable::instance().find(fd))
            if (auto answer = drive(conn, fd, *entry, failure)) return *answer;
        PostgresPollingStatusType status;
        const char* refusal = nullptr;
        {
            ActivePolicy active(policy);
            status = real(conn);
            refusal = ActivePolicy::refusal();
        }
        if (!failure.empty()) append_error(conn, failure);
        if (refusal != nullptr) append_error(conn, refusal);
        return status;
    } catch (...) {
        return real(conn);
    }
}

__attribute__((visibility("default"))) void PQfinish(PGconn* conn) {
    if (conn != nullptr) forget(conn);
    libpq().PQfinish(conn);
}

}  // extern "C"
