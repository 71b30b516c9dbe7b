// A connection pool's worth of threads, each opening, using and closing
// libpq connections for a while as the others do the same: the client
// library's tables, locks and per-session resources under real contention.
// Run under AddressSanitizer or ThreadSanitizer (libclient/tests/rdma/
// pool_test.sh); the sanitizer's report is the main check, these figures
// the rest.
//
// Usage: pool CONNINFO THREADS SECONDS [USE]
// Each thread loops until SECONDS have passed, taking turns among three
// uses of a connection: plain queries and a transaction, a pipeline of
// queries (libpq's pipeline mode), and a large result read on a
// non-blocking connection from a poll() loop; USE (0, 1 or 2) keeps to
// one. Every connection asks the server which transport it is on. The
// threads start together, before any connection.
// Prints "connections=N rdma=N failed=N", "descriptors before=N after=N",
// "pinned_kb before=N after=N" and "peak descriptors=N pinned_kb=N" (while
// sessions were open), and one line per failure (at most 10) and per
// descriptor left open. Exit 0 only when every connection worked, the
// peaks were above the baseline, and nothing was left open or pinned.
#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "libclient/tests/rdma/process_usage.hpp"

namespace {

using pg_rdma::client_tests::kept_for_the_process;
using pg_rdma::client_tests::open_descriptors;
using pg_rdma::client_tests::session_descriptors;
using pg_rdma::client_tests::pinned_kb;
using Clock = std::chrono::steady_clock;

// Rows of the large result: ~1 MB, several times the library's ring.
constexpr int kLargeRows = 8000;
// Queries sent in one pipeline.
constexpr int kPipelineDepth = 16;
// At most this many failures are printed (all are counted).
constexpr int kFailuresShown = 10;
// How often the descriptors and pinned memory are sampled for their peaks.
constexpr int kSampleEveryMs = 100;

const char* conninfo = "";
std::atomic<long> connections{0}, on_rdma{0}, failed{0};
std::mutex print_lock;

void failure(const std::string& what) {
    const long n = failed.fetch_add(1) + 1;
    if (n > kFailuresShown) return;
    const std::lock_guard<std::mutex> hold(print_lock);
    std::printf("failure: %s\n", what.c_str());
    std::fflush(stdout);
}

std::string error_of(PGconn* conn) {
    std::string e = PQerrorMessage(conn);
    while (!e.empty() && e.back() == '\n') e.pop_back();
    return e;
}

// One result of one row, one column: its text, or "" after a failure.
std::string single_value(PGconn* conn, const char* sql) {
    PGresult* res = PQexec(conn, sql);
    std::string value;
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
        value = PQgetvalue(res, 0, 0);
    else
        failure(std::string(sql) + ": " + error_of(conn));
    PQclear(res);
    return value;
}

bool pipeline(PGconn* conn) {
    if (PQenterPipelineMode(conn) != 1) return failure("enter pipeline: " + error_of(conn)), false;
    for (int i = 0; i < kPipelineDepth; ++i) {
        const std::string n = std::to_string(i);
        const char* values[] = {n.c_str()};
        if (PQsendQueryParams(conn, "select $1::int + 1", 1, nullptr, values, nullptr, nullptr, 0) != 1)
            return failure("pipeline send: " + error_of(conn)), false;
    }
    if (PQpipelineSync(conn) != 1) return failure("pipeline sync: " + error_of(conn)), false;
    bool ok = true;
    for (int i = 0; i < kPipelineDepth; ++i) {
        PGresult* res = PQgetResult(conn);
        if (PQresultStatus(res) != PGRES_TUPLES_OK || std::atoi(PQgetvalue(res, 0, 0)) != i + 1) ok = false;
        PQclear(res);
        PQclear(PQgetResult(conn));  // the null that ends each query's results
    }
    PGresult* sync = PQgetResult(conn);
    if (PQresultStatus(sync) != PGRES_PIPELINE_SYNC) ok = false;
    PQclear(sync);
    if (!ok || PQexitPipelineMode(conn) != 1) return failure("pipeline: " + error_of(conn)), false;
    return true;
}

bool large_nonblocking(PGconn* conn) {
    if (PQsetnonblocking(conn, 1) != 0 ||
        PQsendQuery(conn, ("select i, repeat('x', 100) from generate_series(1, " + std::to_string(kLargeRows) +
                           ") i").c_str()) != 1)
        return failure("large send: " + error_of(conn)), false;
    for (int flushed; (flushed = PQflush(conn)) != 0;) {
        if (flushed < 0) return failure("large flush: " + error_of(conn)), false;
        pollfd p{PQsocket(conn), POLLIN | POLLOUT, 0};
        if (poll(&p, 1, 30000) <= 0) return failure("large: not writable in 30 s"), false;
        if (PQconsumeInput(conn) != 1) return failure("large flush: " + error_of(conn)), false;
    }
    long rows = 0;
    for (;;) {
        while (PQisBusy(conn)) {
            pollfd p{PQsocket(conn), POLLIN, 0};
            if (poll(&p, 1, 30000) <= 0) return failure("large: no reply in 30 s"), false;
            if (PQconsumeInput(conn) != 1) return failure("large read: " + error_of(conn)), false;
        }
        PGresult* res = PQgetResult(conn);
        if (!res) break;
        if (PQresultStatus(res) == PGRES_TUPLES_OK) rows += PQntuples(res);
        PQclear(res);
    }
    if (rows != kLargeRows) return failure("large: " + std::to_string(rows) + " rows"), false;
    if (PQsetnonblocking(conn, 0) != 0) return failure("back to blocking: " + error_of(conn)), false;
    return true;
}

int only_use = -1;  // USE, or -1 for all in turn

void one_connection(int turn) {
    PGconn* conn = PQconnectdb(conninfo);
    if (PQstatus(conn) != CONNECTION_OK) {
        failure("connect: " + error_of(conn));
        PQfinish(conn);
        return;
    }
    connections.fetch_add(1);
    if (single_value(conn, "select transport from pg_stat_rdma where pid = pg_backend_pid()") == "rdma")
        on_rdma.fetch_add(1);
    bool ok = true;
    switch (only_use >= 0 ? only_use : turn % 3) {
        case 0: {
            ok = single_value(conn, "select count(*) from generate_series(1, 1000)") == "1000";
            PGresult* res = PQexec(conn, "begin; create temporary table t (i int); insert into t values (1); commit");
            ok = ok && PQresultStatus(res) == PGRES_COMMAND_OK;
            if (PQresultStatus(res) != PGRES_COMMAND_OK) failure("transaction: " + error_of(conn));
            PQclear(res);
            break;
        }
        case 1: ok = pipeline(conn); break;
        default: ok = large_nonblocking(conn); break;
    }
    (void)ok;  // failures are counted where they happen
    PQfinish(conn);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4 && argc != 5) {
        std::fprintf(stderr, "usage: pool CONNINFO THREADS SECONDS [USE]\n");
        return 2;
    }
    if (argc == 5) only_use = std::atoi(argv[4]) % 3;
    conninfo = argv[1];
    const int threads = std::atoi(argv[2]);
    const auto until = Clock::now() + std::chrono::seconds(std::atoi(argv[3]));

    // The baseline comes before any connection, and every thread makes its
    // first one at the same moment: the library's first use (its lazily
    // loaded libraries and tables) happens under contention too.
    const auto fds_before = open_descriptors();
    const long pinned_before = pinned_kb();
    if (fds_before.empty() || pinned_before < 0) {
        std::printf("cannot read /proc/self/fd or VmPin\n");
        return 1;
    }
    // The peaks while sessions are open: proof that these figures see a
    // session's descriptors and pinned memory at all.
    std::atomic<bool> running{true};
    std::size_t fds_peak = 0;
    long pinned_peak = 0;
    std::thread sampler([&] {
        while (running.load()) {
            fds_peak = std::max(fds_peak, open_descriptors().size());
            pinned_peak = std::max(pinned_peak, pinned_kb());
            std::this_thread::sleep_for(std::chrono::milliseconds(kSampleEveryMs));
        }
    });
    std::atomic<int> ready{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([t, until, threads, &ready] {
            ready.fetch_add(1);
            while (ready.load() < threads) std::this_thread::yield();
            for (int turn = t; Clock::now() < until; ++turn) one_connection(turn);
        });
    for (auto& t : pool) t.join();
    running = false;
    sampler.join();

    const auto fds_after = open_descriptors();
    const long pinned_after = pinned_kb();
    std::printf("connections=%ld rdma=%ld failed=%ld\n", connections.load(), on_rdma.load(), failed.load());
    // (Each count includes the directory iterator's own descriptor, and
    // leaves out the device's, which the RDMA libraries keep once used.)
    std::printf("descriptors before=%zu after=%zu\n", session_descriptors(fds_before), session_descriptors(fds_after));
    int shown = 0;
    for (const auto& [fd, target] : fds_after)
        if (!fds_before.contains(fd) && !kept_for_the_process(target) && shown++ < kFailuresShown)
            std::printf("left open: %d -> %s\n", fd, target.c_str());
    std::printf("pinned_kb before=%ld after=%ld\n", pinned_before, pinned_after);
    std::printf("peak descriptors=%zu pinned_kb=%ld\n", fds_peak, pinned_peak);
    const bool seen = fds_peak > fds_before.size() && pinned_peak > pinned_before;
    if (!seen) std::printf("the figures never moved while sessions were open\n");
    const bool none_left = session_descriptors(fds_after) == session_descriptors(fds_before);
    return failed.load() == 0 && seen && none_left && pinned_after == pinned_before ? 0 : 1;
}
