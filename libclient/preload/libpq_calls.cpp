#include "libclient/preload/libpq_calls.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "server_ext/interpose/library_function.hpp"

namespace pg_rdma::client {
namespace {

LibpqCalls g_libpq{};
std::once_flag g_once;

template <typename F>
void find(F& slot, const char* name) noexcept {
    slot = reinterpret_cast<F>(interpose::library_function("libpq.so.5", name));
    if (slot == nullptr) {
        static const char prefix[] = "libpq_rdma: libpq.so.5 is not loaded or lacks ";
        (void)!syscall(SYS_write, 2, prefix, sizeof prefix - 1);
        (void)!syscall(SYS_write, 2, name, std::strlen(name));
        (void)!syscall(SYS_write, 2, "\n", 1);
        std::abort();
    }
}

void load() noexcept {
    find(g_libpq.PQconnectdb, "PQconnectdb");
    find(g_libpq.PQconnectdbParams, "PQconnectdbParams");
    find(g_libpq.PQconnectStart, "PQconnectStart");
    find(g_libpq.PQconnectStartParams, "PQconnectStartParams");
    find(g_libpq.PQsetdbLogin, "PQsetdbLogin");
    find(g_libpq.PQconnectPoll, "PQconnectPoll");
    find(g_libpq.PQfinish, "PQfinish");
    find(g_libpq.PQsocket, "PQsocket");
    find(g_libpq.PQstatus, "PQstatus");
    find(g_libpq.PQerrorMessage, "PQerrorMessage");
    find(g_libpq.PQhost, "PQhost");
    find(g_libpq.PQport, "PQport");
    find(g_libpq.PQconninfo, "PQconninfo");
    find(g_libpq.PQconninfoParse, "PQconninfoParse");
    find(g_libpq.PQconndefaults, "PQconndefaults");
    find(g_libpq.PQconninfoFree, "PQconninfoFree");
    find(g_libpq.resetPQExpBuffer, "resetPQExpBuffer");
    find(g_libpq.appendPQExpBufferStr, "appendPQExpBufferStr");
}

}  // namespace

const LibpqCalls& libpq() noexcept {
    std::call_once(g_once, load);
    return g_libpq;
}

}  // namespace pg_rdma::client
