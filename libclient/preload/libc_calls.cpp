#include "libclient/preload/libc_calls.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "server_ext/interpose/library_function.hpp"

namespace pg_rdma::client {
namespace {

LibcCalls g_libc{};

__attribute__((tls_model("initial-exec"))) thread_local int t_transport_depth = 0;

template <typename F>
void find(F& slot, const char* name) noexcept {
    slot = reinterpret_cast<F>(interpose::library_function("libc.so.6", name));
    if (slot == nullptr) {
        static const char prefix[] = "libpq_rdma: cannot find the C library's ";
        // Not ::write nor ::syscall: inside this library those are our own
        // wrappers, which need what is being found here.
        if (g_libc.syscall != nullptr) {
            (void)!g_libc.syscall(SYS_write, 2, prefix, sizeof prefix - 1);
            (void)!g_libc.syscall(SYS_write, 2, name, std::strlen(name));
            (void)!g_libc.syscall(SYS_write, 2, "\n", 1);
        }
        std::abort();
    }
}

// For calls newer C libraries add: nullptr when this one has none.
template <typename F>
void find_optional(F& slot, const char* name) noexcept {
    slot = reinterpret_cast<F>(interpose::library_function("libc.so.6", name));
}

void load() noexcept {
    // Alone first (libc_syscall): find()'s error messages need it.
    (void)libc_syscall();
    if (g_libc.syscall == nullptr) find(g_libc.syscall, "syscall");
    find(g_libc.connect, "connect");
    find(g_libc.close, "close");
    find(g_libc.recv, "recv");
    find(g_libc.send, "send");
    find(g_libc.read, "read");
    find(g_libc.write, "write");
    find(g_libc.readv, "readv");
    find(g_libc.writev, "writev");
    find(g_libc.recvfrom, "recvfrom");
    find(g_libc.sendto, "sendto");
    find(g_libc.recvmsg, "recvmsg");
    find(g_libc.sendmsg, "sendmsg");
    find(g_libc.poll, "poll");
    find(g_libc.ppoll, "ppoll");
    find(g_libc.select, "select");
    find(g_libc.pselect, "pselect");
    find(g_libc.getsockopt, "getsockopt");
    find(g_libc.setsockopt, "setsockopt");
    find(g_libc.getsockname, "getsockname");
    find(g_libc.getpeername, "getpeername");
    find(g_libc.shutdown, "shutdown");
    find(g_libc.epoll_ctl, "epoll_ctl");
    find(g_libc.epoll_wait, "epoll_wait");
    find(g_libc.epoll_pwait, "epoll_pwait");
    find_optional(g_libc.epoll_pwait2, "epoll_pwait2");
    find(g_libc.dup, "dup");
    find(g_libc.dup2, "dup2");
    find(g_libc.dup3, "dup3");
    find(g_libc.fcntl, "fcntl");
    find(g_libc.ioctl, "ioctl");
    find(g_libc.fclose, "fclose");
    find_optional(g_libc.fcntl64, "fcntl64");
    find_optional(g_libc.close_range, "close_range");
    find_optional(g_libc.closefrom, "closefrom");
    find(g_libc.fopen, "fopen");
    find(g_libc.fopen64, "fopen64");
}

// Runs before main() (and before any constructor of the program's own that
// could call a wrapper, as a preloaded library initialises first).
__attribute__((constructor(101))) void load_at_start() { load(); }

}  // namespace

namespace {
__attribute__((tls_model("initial-exec"))) thread_local bool t_finding_syscall = false;

long no_syscall(long, ...) {
    errno = ENOSYS;
    return -1;
}
}  // namespace

SyscallFunction libc_syscall() noexcept {
    if (g_libc.syscall != nullptr) return g_libc.syscall;
    if (t_finding_syscall) return no_syscall;
    t_finding_syscall = true;
    g_libc.syscall = reinterpret_cast<SyscallFunction>(interpose::library_function("libc.so.6", "syscall"));
    t_finding_syscall = false;
    return g_libc.syscall != nullptr ? g_libc.syscall : no_syscall;
}

const LibcCalls& libc() noexcept {
    // A wrapper called by another library's constructor that ran before ours.
    if (g_libc.close == nullptr) load();
    return g_libc;
}

bool in_transport() noexcept { return t_transport_depth > 0; }
TransportCall::TransportCall() noexcept { ++t_transport_depth; }
TransportCall::~TransportCall() { --t_transport_depth; }

}  // namespace pg_rdma::client
