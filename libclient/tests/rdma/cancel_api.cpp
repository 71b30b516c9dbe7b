// cancel_api CONNINFO: cancels a running query of a session with libpq 17's
// cancel API (PQcancelCreate/Start/Poll, then PQcancelBlocking), the way
// postgres_fdw and new drivers do. Run under pgrdma, the session itself is
// on RDMA (CONNINFO says with_rsocket=require) and each cancel request is
// a new connection libpq makes internally, not through PQconnect*.
//
// Prints one "ok: ..." line per cancel and exits 0 when both cancelled the
// query (SQLSTATE 57014) and the session still answers afterwards; 1 on any
// failure; 77 when built against a libpq without that API (before 17).
#include <libpq-fe.h>
#include <poll.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

namespace {

constexpr int kExitSkip = 77;

#ifdef LIBPQ_HAS_ASYNC_CANCEL
constexpr auto kStartWait = std::chrono::seconds(30);  // for the query to show as active
constexpr int kPollTimeoutMs = 30'000;                 // per step of the non-blocking cancel

int fail(const char* what, const char* detail) {
    std::fprintf(stderr, "cancel_api: FAIL: %s: %s\n", what, detail != nullptr ? detail : "");
    return 1;
}

// The first column of the one-row result of SQL, or "" on error.
std::string one_value(PGconn* conn, const char* sql) {
    PGresult* r = PQexec(conn, sql);
    std::string v = (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) ? PQgetvalue(r, 0, 0) : "";
    PQclear(r);
    return v;
}

// Starts a long query and waits (on a second session) until it runs.
bool start_sleeper(PGconn* conn, PGconn* watcher, const std::string& pid) {
    if (PQsendQuery(conn, "select pg_sleep(600)") == 0) return false;
    const std::string probe = "select count(*) from pg_stat_activity where pid = " + pid +
                              " and state = 'active' and query like 'select pg_sleep%'";
    const auto deadline = std::chrono::steady_clock::now() + kStartWait;
    while (std::chrono::steady_clock::now() < deadline) {
        if (one_value(watcher, probe.c_str()) == "1") return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
}

// True when the query ended with "canceling statement due to user request".
bool was_cancelled(PGconn* conn) {
    bool cancelled = false;
    while (PGresult* r = PQgetResult(conn)) {
        const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        if (state != nullptr && std::strcmp(state, "57014") == 0) cancelled = true;
        PQclear(r);
    }
    return cancelled;
}

// The non-blocking form: PQcancelStart, then PQcancelPoll on its socket.
bool cancel_nonblocking(PGconn* conn, std::string& why) {
    PGcancelConn* c = PQcancelCreate(conn);
    if (c == nullptr) { why = "PQcancelCreate returned NULL"; return false; }
    bool ok = PQcancelStart(c) != 0;
    while (ok) {
        const PostgresPollingStatusType st = PQcancelPoll(c);
        if (st == PGRES_POLLING_OK) break;
        if (st == PGRES_POLLING_FAILED) { ok = false; break; }
        pollfd p{PQcancelSocket(c), static_cast<short>(st == PGRES_POLLING_READING ? POLLIN : POLLOUT), 0};
        if (::poll(&p, 1, kPollTimeoutMs) != 1) { why = "the cancel connection did not become ready"; ok = false; }
    }
    if (!ok && why.empty()) why = PQcancelErrorMessage(c);
    PQcancelFinish(c);
    return ok;
}

bool cancel_blocking(PGconn* conn, std::string& why) {
    PGcancelConn* c = PQcancelCreate(conn);
    if (c == nullptr) { why = "PQcancelCreate returned NULL"; return false; }
    const bool ok = PQcancelBlocking(c) != 0;
    if (!ok) why = PQcancelErrorMessage(c);
    PQcancelFinish(c);
    return ok;
}
#endif

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: cancel_api CONNINFO\n");
        return 2;
    }
#ifndef LIBPQ_HAS_ASYNC_CANCEL
    (void)argv;
    std::printf("cancel_api: this libpq (%d) has no PQcancelCreate (17+)\n", PQlibVersion());
    return kExitSkip;
#else
    PGconn* conn = PQconnectdb(argv[1]);
    PGconn* watcher = PQconnectdb(argv[1]);
    if (PQstatus(conn) != CONNECTION_OK) return fail("connect", PQerrorMessage(conn));
    if (PQstatus(watcher) != CONNECTION_OK) return fail("connect (watcher)", PQerrorMessage(watcher));
    const std::string pid = std::to_string(PQbackendPID(conn));
    const std::string transport =
        one_value(conn, "select transport from pg_stat_rdma where pid = pg_backend_pid()");
    if (transport != "rdma") return fail("the session is not on RDMA", transport.c_str());

    struct Way {
        const char* name;
        bool (*cancel)(PGconn*, std::string&);
    };
    for (const Way& way : {Way{"PQcancelStart/PQcancelPoll", cancel_nonblocking},
                           Way{"PQcancelBlocking", cancel_blocking}}) {
        if (!start_sleeper(conn, watcher, pid)) return fail(way.name, "the query did not start");
        std::string why;
        if (!way.cancel(conn, why)) return fail(way.name, why.c_str());
        if (!was_cancelled(conn)) return fail(way.name, "the query did not end with SQLSTATE 57014");
        if (one_value(conn, "select 1") != "1") return fail(way.name, "the session does not answer afterwards");
        std::printf("ok: %s cancelled a query of an RDMA session; the session answers afterwards\n", way.name);
    }
    PQfinish(watcher);
    PQfinish(conn);
    return 0;
#endif
}
