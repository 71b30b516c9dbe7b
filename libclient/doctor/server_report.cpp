#include "libclient/doctor/server_report.hpp"

#include <libpq-fe.h>

#include <cstdio>
#include <cstring>
#include <memory>

#include "libclient/conninfo/connection_string.hpp"
#include "libclient/doctor/verdict.hpp"

namespace pg_rdma::doctor {
namespace {

struct ConnDeleter {
    void operator()(PGconn* c) const { PQfinish(c); }
};
struct ResultDeleter {
    void operator()(PGresult* r) const { PQclear(r); }
};

constexpr const char* kQuery = "SELECT item, target, status, detail FROM pg_rdma_check_server()";
constexpr const char* kUndefinedFunction = "42883";
constexpr const char* kInsufficientPrivilege = "42501";

std::string one_line(const char* message) {
    std::string s = message != nullptr ? message : "";
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    for (char& c : s)
        if (c == '\n' || c == '\t') c = ' ';
    return s;
}

int finish(int code, const std::string& cause, const std::string& text, const std::string& fix) {
    std::printf("verdict:     %s\n", text.c_str());
    if (!fix.empty()) std::printf("fix:         %s\n", fix.c_str());
    std::printf("cause:       %s (exit %d)\n", cause.c_str(), code);
    return code;
}

}  // namespace

int report_server(const std::string& conninfo, int timeout_s, bool quiet) {
    // Plain libpq: with_rsocket means nothing to it.
    const conninfo::Extraction extracted = conninfo::extract_from_connection_string(conninfo);
    // connect_timeout first: the string's own, expanded from dbname after
    // it, wins.
    const std::string timeout = std::to_string(timeout_s);
    const char* const keywords[] = {"connect_timeout", "dbname", nullptr};
    const char* const values[] = {timeout.c_str(), extracted.rewritten.c_str(), nullptr};
    const std::unique_ptr<PGconn, ConnDeleter> conn(PQconnectdbParams(keywords, values, 1));
    if (!conn || PQstatus(conn.get()) != CONNECTION_OK)
        return finish(kExitNoServer, "no_server", "cannot connect: " + one_line(conn ? PQerrorMessage(conn.get()) : "out of memory"),
                      "check the connection string; any role of pg_monitor may run the check");
    const std::unique_ptr<PGresult, ResultDeleter> result(PQexec(conn.get(), kQuery));
    if (PQresultStatus(result.get()) != PGRES_TUPLES_OK) {
        const char* state = PQresultErrorField(result.get(), PG_DIAG_SQLSTATE);
        const std::string message = one_line(PQresultErrorMessage(result.get()));
        if (state != nullptr && std::strcmp(state, kUndefinedFunction) == 0)
            return finish(kExitNoPgRdma, "no_check", "this database has no pg_rdma_check_server(): " + message,
                          "CREATE EXTENSION pg_rdma (or ALTER EXTENSION pg_rdma UPDATE to 0.3 or later) in the "
                          "database you connect to; shared_preload_libraries must hold pg_rdma");
        if (state != nullptr && std::strcmp(state, kInsufficientPrivilege) == 0)
            return finish(kExitUsage, "not_allowed", message,
                          "connect as a superuser or a member of pg_monitor (GRANT pg_monitor TO ...)");
        return finish(kExitServer, "check_failed", message, "");
    }
    int problems = 0, warnings = 0;
    for (int i = 0; i < PQntuples(result.get()); ++i) {
        const std::string status = PQgetvalue(result.get(), i, 2);
        problems += status == "problem";
        warnings += status == "warning";
        if (!quiet || status != "ok")
            std::printf("%-8s %-15s %s: %s\n", status.c_str(), PQgetvalue(result.get(), i, 0),
                        PQgetvalue(result.get(), i, 1), PQgetvalue(result.get(), i, 3));
    }
    const char* host = PQhost(conn.get());
    const std::string server = std::string(host != nullptr ? host : "?") + ":" + PQport(conn.get());
    if (problems > 0)
        return finish(kExitServer, "server_problem",
                      std::to_string(problems) + " problem(s) in the RDMA set-up of the server at " + server,
                      "each problem line above says what to do");
    return finish(kExitWorks, "server_ok",
                  "the RDMA set-up of the server at " + server + " has no problem" +
                      (warnings > 0 ? " (" + std::to_string(warnings) + " warning(s) above)" : ""),
                  "");
}

}  // namespace pg_rdma::doctor
