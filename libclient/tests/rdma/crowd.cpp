// A crowd of libpq connections set up at the same instant from one process,
// as a connection pool filling up does: N PQconnectStart calls, then one
// poll() loop drives every PQconnectPoll until each is made or has failed.
// Each made session asks the server which transport it is on, and all stay
// open until the last is made (so that they are concurrent).
//
// Usage: crowd CONNINFO N [HOLD_S [WAVE]]
// Prints "connected=N rdma=N tcp=N failed=N", setup latency percentiles in
// ms ("setup_ms p50=... p99=... max=..."), this process's descriptors and
// pinned memory with every session open ("peak descriptors=N pinned_kb=N"),
// and one line per failure with libpq's message. With HOLD_S, the sessions
// stay open that many seconds after the peak line, so that a script can
// look at the server meanwhile. With WAVE, the connections start WAVE at a
// time, each wave once the one before is made (a pool that grows), and the
// setup latency is each connection's own, from its wave's start. Exit 0
// only when every connection was made.
#include <libpq-fe.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "libclient/tests/rdma/process_usage.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Attempt {
    PGconn* conn = nullptr;
    PostgresPollingStatusType last = PGRES_POLLING_WRITING;
    bool done = false;
    bool ok = false;
    double setup_ms = 0;
    std::string transport;
    std::string error;
};

const char* conninfo = "";

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
}

long descriptors() { return static_cast<long>(pg_rdma::client_tests::open_descriptors().size()) - 1; }

// Starts [begin, end) at once and drives them until each is made or has
// failed. False when poll() itself failed.
bool run_wave(Attempt* begin, Attempt* end) {
    const auto start = Clock::now();
    for (Attempt* a = begin; a != end; ++a) {
        a->conn = PQconnectStart(conninfo);
        if (a->conn == nullptr || PQstatus(a->conn) == CONNECTION_BAD) {
            a->done = true;
            a->error = a->conn != nullptr ? PQerrorMessage(a->conn) : "out of memory";
        }
    }
    for (;;) {
        std::vector<pollfd> fds;
        std::vector<Attempt*> owners;
        for (Attempt* a = begin; a != end; ++a) {
            if (a->done) continue;
            const short ev = a->last == PGRES_POLLING_READING ? POLLIN : POLLOUT;
            fds.push_back({PQsocket(a->conn), ev, 0});
            owners.push_back(a);
        }
        if (fds.empty()) return true;
        if (poll(fds.data(), fds.size(), 1000) < 0) {
            std::perror("poll");
            return false;
        }
        for (std::size_t i = 0; i < fds.size(); ++i) {
            if (fds[i].revents == 0) continue;
            Attempt& a = *owners[i];
            a.last = PQconnectPoll(a.conn);
            if (a.last != PGRES_POLLING_OK && a.last != PGRES_POLLING_FAILED) continue;
            a.done = true;
            a.setup_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
            a.ok = a.last == PGRES_POLLING_OK;
            if (!a.ok) a.error = PQerrorMessage(a.conn);
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3 || argc > 5) {
        std::fprintf(stderr, "usage: crowd CONNINFO N [HOLD_S [WAVE]]\n");
        return 2;
    }
    const int n = std::atoi(argv[2]);
    const int hold_s = argc >= 4 ? std::atoi(argv[3]) : 0;
    const int wave = argc == 5 ? std::atoi(argv[4]) : n;
    if (n <= 0 || wave <= 0) {
        std::fprintf(stderr, "crowd: N and WAVE must be positive\n");
        return 2;
    }
    // As a pool sized for this many connections is run: descriptors up to
    // the hard limit (an RDMA session holds about eight: 1,605 for 200).
    rlimit files{};
    if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
        files.rlim_cur = files.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &files);
    }
    conninfo = argv[1];
    std::vector<Attempt> attempts(static_cast<std::size_t>(n));
    for (std::size_t first = 0; first < attempts.size(); first += static_cast<std::size_t>(wave)) {
        const std::size_t last = std::min(attempts.size(), first + static_cast<std::size_t>(wave));
        if (!run_wave(attempts.data() + first, attempts.data() + last)) return 3;
    }
    int rdma = 0, tcp = 0, failed = 0, connected = 0;
    std::vector<double> setup;
    for (Attempt& a : attempts) {
        if (!a.ok) {
            ++failed;
            continue;
        }
        ++connected;
        setup.push_back(a.setup_ms);
        PGresult* r = PQexec(a.conn, "select coalesce((select transport from pg_stat_rdma where pid = pg_backend_pid()),"
                                     " 'none')");
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) a.transport = PQgetvalue(r, 0, 0);
        else a.transport = std::string("query failed: ") + PQerrorMessage(a.conn);
        PQclear(r);
        if (a.transport == "rdma") ++rdma;
        else if (a.transport == "tcp") ++tcp;
    }
    std::printf("connected=%d rdma=%d tcp=%d failed=%d\n", connected, rdma, tcp, failed);
    std::printf("setup_ms p50=%.0f p99=%.0f max=%.0f\n", percentile(setup, 0.5), percentile(setup, 0.99),
                percentile(setup, 1.0));
    std::printf("peak descriptors=%ld pinned_kb=%ld\n", descriptors(), pg_rdma::client_tests::pinned_kb());
    std::fflush(stdout);
    if (hold_s > 0) std::this_thread::sleep_for(std::chrono::seconds(hold_s));
    int shown = 0;
    for (const Attempt& a : attempts) {
        if (!a.ok && shown++ < 10) std::printf("failed: %s", a.error.c_str());
        if (a.ok && a.transport != "rdma" && a.transport != "tcp") std::printf("odd: %s\n", a.transport.c_str());
    }
    for (Attempt& a : attempts) PQfinish(a.conn);
    return failed == 0 && rdma + tcp == connected ? 0 : 1;
}
