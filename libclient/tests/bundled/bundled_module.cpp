// A loadable module linked against libpq, as a Python extension in a binary
// wheel is (loaded with RTLD_LOCAL, its libpq a renamed private copy):
// bundled_connect(CONNINFO) connects, runs `select 42` and says what came
// back on stdout, or libpq's error on stderr. 0 on success, else 1.
#include <libpq-fe.h>

#include <cstdio>

extern "C" __attribute__((visibility("default"))) int bundled_connect(const char* conninfo) {
    PGconn* conn = PQconnectdb(conninfo);
    if (conn == nullptr) {
        std::fputs("PQconnectdb returned NULL\n", stderr);
        return 1;
    }
    int rc = 1;
    if (PQstatus(conn) != CONNECTION_OK) {
        std::fputs(PQerrorMessage(conn), stderr);
    } else if (PGresult* res = PQexec(conn, "select 42"); PQresultStatus(res) == PGRES_TUPLES_OK) {
        std::printf("%s\n", PQgetvalue(res, 0, 0));
        PQclear(res);
        rc = 0;
    } else {
        std::fputs(PQerrorMessage(conn), stderr);
        PQclear(res);
    }
    PQfinish(conn);
    return rc;
}
