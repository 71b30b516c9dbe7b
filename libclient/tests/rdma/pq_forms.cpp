// pq_forms FORM CONNINFO: connects with one of libpq's connection calls,
// runs `select 42` and a few pipelined queries, prints what came back.
// Run under libpq_rdma.so by the end-to-end test. FORM:
//   connectdb, connectdb_params, setdblogin      blocking calls
//   start_poll, start_select, start_epoll, start_params_poll
//        PQconnectStart* + PQconnectPoll, waiting on PQsocket() with poll(),
//        select() or one epoll set; the queries then go
//        non-blocking (PQsendQuery, PQflush, PQconsumeInput) with the same wait
//   busy_neighbour  start_epoll, then prints the backend's pid and waits in
//        that epoll set, beside a pipe that is readable on every call,
//        until the connection is lost (exit 0) or 60 s pass (exit 1): an
//        event loop whose other descriptors always have something must
//        still learn that the server went away
// After `select 42` it prints what libpq_rdma.so says of the connection
// (libpq-rdma.h): "rdma in use: N" and "rdma ATTRIBUTE: VALUE" for each
// attribute, "(null)" for none; "rdma: no libpq_rdma.so" without it.
// Exit 0 on success; 1 with PQerrorMessage on stderr otherwise.
#include "libclient/preload/libpq-rdma.h"

#include <libpq-fe.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

bool g_use_select = false;
// start_epoll: one epoll set for the whole run, PQsocket() registered once
// and modified as the wanted events change, as an event loop does.
int g_epoll = -1;
int g_registered = -1;

bool wait_epoll(int fd, bool for_read, bool for_write) {
    epoll_event ev{};
    ev.events = (for_read ? EPOLLIN : 0u) | (for_write ? EPOLLOUT : 0u);
    ev.data.u64 = 7;
    const int op = g_registered == fd ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(g_epoll, op, fd, &ev) != 0) {
        std::perror("pq_forms: epoll_ctl");
        return false;
    }
    g_registered = fd;
    epoll_event out{};
    const int n = epoll_wait(g_epoll, &out, 1, 10'000);
    return n == 1 && out.data.u64 == 7;
}

// Waits until PQsocket() is readable or writable as asked; the longest
// single wait is recorded (PQconnectPoll must not block the loop).
bool wait_socket(PGconn* c, bool for_read, bool for_write) {
    const int fd = PQsocket(c);
    if (g_epoll >= 0) return wait_epoll(fd, for_read, for_write);
    if (g_use_select) {
        fd_set r, w;
        FD_ZERO(&r);
        FD_ZERO(&w);
        if (for_read) FD_SET(fd, &r);
        if (for_write) FD_SET(fd, &w);
        timeval tv{10, 0};
        return select(fd + 1, &r, &w, nullptr, &tv) > 0;
    }
    pollfd p{fd, static_cast<short>((for_read ? POLLIN : 0) | (for_write ? POLLOUT : 0)), 0};
    return poll(&p, 1, 10'000) > 0;
}

double g_longest_call_ms = 0;

PGconn* connect_async(PGconn* c) {
    if (c == nullptr || PQstatus(c) == CONNECTION_BAD) return c;
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;
    for (;;) {
        if (st == PGRES_POLLING_OK || st == PGRES_POLLING_FAILED) return c;
        if (!wait_socket(c, st == PGRES_POLLING_READING, st == PGRES_POLLING_WRITING)) {
            std::fprintf(stderr, "pq_forms: timed out waiting on PQsocket() during connect\n");
            return c;
        }
        const auto t0 = std::chrono::steady_clock::now();
        st = PQconnectPoll(c);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (ms > g_longest_call_ms) g_longest_call_ms = ms;
    }
}

// Non-blocking pipelined queries: send all, flush, read all.
bool async_queries(PGconn* c) {
    if (PQsetnonblocking(c, 1) != 0 || PQenterPipelineMode(c) != 1) return false;
    for (int i = 1; i <= 3; ++i) {
        const std::string q = "select " + std::to_string(i * 100) + " + length(repeat('x', 200000))";
        if (PQsendQueryParams(c, q.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0) != 1) return false;
    }
    if (PQpipelineSync(c) != 1) return false;
    int flushed;
    while ((flushed = PQflush(c)) == 1)
        if (!wait_socket(c, true, true) || PQconsumeInput(c) != 1) return false;
    if (flushed < 0) return false;
    int results = 0;
    for (;;) {
        while (PQisBusy(c))
            if (!wait_socket(c, true, false) || PQconsumeInput(c) != 1) return false;
        PGresult* r = PQgetResult(c);
        if (r == nullptr) continue;  // end of one query's results
        const ExecStatusType s = PQresultStatus(r);
        if (s == PGRES_PIPELINE_SYNC) {
            PQclear(r);
            break;
        }
        if (s != PGRES_TUPLES_OK) {
            std::fprintf(stderr, "pq_forms: %s", PQresultErrorMessage(r));
            PQclear(r);
            return false;
        }
        std::printf("pipelined %s\n", PQgetvalue(r, 0, 0));
        ++results;
        PQclear(r);
    }
    return results == 3 && PQexitPipelineMode(c) == 1;
}

// Waits, for at most kLostWithin, until PQsocket() reports the session's end.
bool sees_connection_lost(PGconn* c) {
    constexpr auto kLostWithin = std::chrono::seconds(60);
    constexpr std::uint64_t kOurs = 7, kPipe = 9;
    int busy[2];
    if (pipe(busy) != 0 || write(busy[1], "x", 1) != 1) return false;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kPipe;
    if (epoll_ctl(g_epoll, EPOLL_CTL_ADD, busy[0], &ev) != 0) return false;
    ev.data.u64 = kOurs;
    if (epoll_ctl(g_epoll, EPOLL_CTL_MOD, PQsocket(c), &ev) != 0) return false;
    std::printf("waiting\n");
    std::fflush(stdout);
    const auto deadline = std::chrono::steady_clock::now() + kLostWithin;
    while (std::chrono::steady_clock::now() < deadline) {
        epoll_event out[2];
        const int n = epoll_wait(g_epoll, out, 2, 1'000);
        for (int i = 0; i < n; ++i) {
            if (out[i].data.u64 != kOurs) continue;
            if (PQconsumeInput(c) == 0 || PQstatus(c) == CONNECTION_BAD) {
                std::printf("connection lost: %s", PQerrorMessage(c));
                return true;
            }
        }
    }
    std::fprintf(stderr, "pq_forms: the connection's end was not reported within 60 s\n");
    return false;
}

void print_rdma_status(const PGconn* c) {
    if (PQrdmaInUse == nullptr || PQrdmaAttribute == nullptr || PQrdmaAttributeNames == nullptr) {
        std::printf("rdma: no libpq_rdma.so\n");
        return;
    }
    std::printf("rdma in use: %d\n", PQrdmaInUse(c));
    for (const char* const* name = PQrdmaAttributeNames(c); *name != nullptr; ++name) {
        const char* value = PQrdmaAttribute(c, *name);
        std::printf("rdma %s: %s\n", *name, value != nullptr ? value : "(null)");
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: pq_forms FORM CONNINFO\n");
        return 2;
    }
    const std::string form = argv[1];
    const char* conninfo = argv[2];
    const char* kw[] = {"dbname", nullptr};
    const char* val[] = {conninfo, nullptr};
    bool async = false;
    PGconn* c = nullptr;
    if (form == "connectdb") c = PQconnectdb(conninfo);
    else if (form == "connectdb_params") c = PQconnectdbParams(kw, val, 1);
    else if (form == "setdblogin") c = PQsetdbLogin(nullptr, nullptr, nullptr, nullptr, conninfo, nullptr, nullptr);
    else if (form == "start_poll") c = connect_async(PQconnectStart(conninfo)), async = true;
    else if (form == "start_select") g_use_select = true, c = connect_async(PQconnectStart(conninfo)), async = true;
    else if (form == "start_epoll") g_epoll = epoll_create1(EPOLL_CLOEXEC), c = connect_async(PQconnectStart(conninfo)), async = true;
    else if (form == "busy_neighbour") g_epoll = epoll_create1(EPOLL_CLOEXEC), c = connect_async(PQconnectStart(conninfo));
    else if (form == "start_params_poll") c = connect_async(PQconnectStartParams(kw, val, 1)), async = true;
    else {
        std::fprintf(stderr, "pq_forms: unknown form %s\n", form.c_str());
        return 2;
    }
    if (c == nullptr || PQstatus(c) != CONNECTION_OK) {
        std::fprintf(stderr, "%s", c != nullptr ? PQerrorMessage(c) : "out of memory\n");
        PQfinish(c);
        return 1;
    }
    if (form == "busy_neighbour") {
        std::printf("backend %d\n", PQbackendPID(c));
        const bool lost = sees_connection_lost(c);
        PQfinish(c);
        return lost ? 0 : 1;
    }
    PGresult* r = PQexec(c, "select 42");
    const bool ok = PQresultStatus(r) == PGRES_TUPLES_OK;
    if (ok) {
        std::printf("%s\n", PQgetvalue(r, 0, 0));
        print_rdma_status(c);
    } else {
        std::fprintf(stderr, "%s", PQerrorMessage(c));
    }
    PQclear(r);
    bool async_ok = true;
    if (ok && async) {
        async_ok = async_queries(c);
        if (!async_ok) std::fprintf(stderr, "pq_forms: pipelined queries failed: %s", PQerrorMessage(c));
        std::printf("longest PQconnectPoll call: %.1f ms\n", g_longest_call_ms);
    }
    PQfinish(c);
    return ok && async_ok ? 0 : 1;
}
