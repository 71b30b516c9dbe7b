// conninfo_probe MODE [CONNINFO]: prints the options libpq hands out, one
// "keyword=value" line per option that has a value ("keyword=(null)" for
// with_rsocket when it has none), in libpq's order. Run with and without
// libpq_rdma.so by preload_host_test.sh. MODE:
//   parse CONNINFO     PQconninfoParse (exit 1 with libpq's message on error)
//   defaults           PQconndefaults
//   conninfo CONNINFO  PQconnectdb, then PQconninfo of the PGconn whether it
//                      connected or not; PQerrorMessage goes to stderr
#include <libpq-fe.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

int print(PQconninfoOption* options) {
    if (options == nullptr) {
        std::fprintf(stderr, "conninfo_probe: no options (out of memory or a bad service file)\n");
        return 1;
    }
    for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
        if (o->val != nullptr)
            std::printf("%s=%s\n", o->keyword, o->val);
        else if (std::strcmp(o->keyword, "with_rsocket") == 0)
            std::printf("with_rsocket=(null)\n");
    }
    PQconninfoFree(options);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "parse" && argc == 3) {
        char* error = nullptr;
        PQconninfoOption* options = PQconninfoParse(argv[2], &error);
        if (options == nullptr) {
            std::fprintf(stderr, "%s", error != nullptr ? error : "out of memory\n");
            PQfreemem(error);
            return 1;
        }
        return print(options);
    }
    if (mode == "defaults" && argc == 2) return print(PQconndefaults());
    if (mode == "conninfo" && argc == 3) {
        PGconn* conn = PQconnectdb(argv[2]);
        std::fprintf(stderr, "%s", PQerrorMessage(conn));
        const int rc = print(PQconninfo(conn));
        PQfinish(conn);
        return rc;
    }
    std::fprintf(stderr, "usage: conninfo_probe parse CONNINFO | defaults | conninfo CONNINFO\n");
    return 2;
}
