// GOT patching on this very test program, linked like the Debian postgres
// binary (PIE, -z now, full RELRO). Built twice: with GNU ld, which routes a
// function that is both called and address-taken through one GLOB_DAT slot
// (.plt.got), and with gold, which gives it a JUMP_SLOT and a GLOB_DAT slot.
// Every check observes real calls: the replacement counts and forwards to
// the original it was handed.
#include "testing/catch.hpp"

#include <dlfcn.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "server_ext/interpose/got_patch.hpp"
#include "server_ext/interpose/library_function.hpp"
#include "server_ext/interpose/tests/maps.hpp"

using namespace pg_rdma::interpose;

namespace {

using recv_fn = ssize_t (*)(int, void*, size_t, int);
using send_fn = ssize_t (*)(int, const void*, size_t, int);
using epoll_wait_fn = int (*)(int, epoll_event*, int, int);
using close_fn = int (*)(int);
using getsockopt_fn = int (*)(int, int, int, void*, socklen_t*);

recv_fn real_recv;
send_fn real_send;
epoll_wait_fn real_epoll_wait;
close_fn real_close;
getsockopt_fn real_getsockopt;
int recv_calls, send_calls, epoll_wait_calls, close_calls, getsockopt_calls, other_recv_calls;

ssize_t counting_recv(int fd, void* buf, size_t len, int flags) {
    ++recv_calls;
    return real_recv(fd, buf, len, flags);
}
ssize_t other_recv(int fd, void* buf, size_t len, int flags) {
    ++other_recv_calls;
    return real_recv(fd, buf, len, flags);
}
ssize_t counting_send(int fd, const void* buf, size_t len, int flags) {
    ++send_calls;
    return real_send(fd, buf, len, flags);
}
int counting_epoll_wait(int epfd, epoll_event* events, int max, int timeout) {
    ++epoll_wait_calls;
    return real_epoll_wait(epfd, events, max, timeout);
}
int counting_close(int fd) {
    ++close_calls;
    return real_close(fd);
}
int counting_getsockopt(int fd, int level, int name, void* value, socklen_t* len) {
    ++getsockopt_calls;
    return real_getsockopt(fd, level, name, value, len);
}

template <typename F>
void* as_void(F f) {
    return reinterpret_cast<void*>(f);
}
template <typename F>
void** as_slot(F* f) {
    return reinterpret_cast<void**>(f);
}

// Takes getsockopt's address afresh on each call (a load from its GLOB_DAT
// slot), the way a program stores an imported function in a table. noipa:
// GCC would otherwise see a const function and reuse its first answer.
__attribute__((noipa)) getsockopt_fn address_of_getsockopt() { return &getsockopt; }

void* libc(const char* symbol) { return library_function("libc.so.6", symbol); }

// Restores every slot when a test case ends, passed or not.
struct RestoreAtEnd {
    ~RestoreAtEnd() { restore_executable_got(); }
};

struct SocketPair {
    int fd[2] = {-1, -1};
    SocketPair() { REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fd) == 0); }
    ~SocketPair() {
        close(fd[0]);
        close(fd[1]);
    }
};

std::vector<Import> slots_of(const char* symbol) {
    const ImportsResult imports = executable_imports();
    REQUIRE(imports.ok);
    std::vector<Import> found;
    for (const Import& i : imports.imports)
        if (i.symbol == symbol) found.push_back(i);
    return found;
}

bool has_kind(const std::vector<Import>& slots, SlotKind kind) {
    return std::any_of(slots.begin(), slots.end(), [&](const Import& i) { return i.kind == kind; });
}

// One byte through the pair, by this program's own send and recv calls.
void exchange_byte(const SocketPair& pair) {
    const char out = 'x';
    char in = 0;
    REQUIRE(send(pair.fd[0], &out, 1, 0) == 1);
    REQUIRE(recv(pair.fd[1], &in, 1, 0) == 1);
    REQUIRE(in == 'x');
}

const std::array<Patch, 4> kSocketPatches = {{
    {"recv", as_void(&counting_recv), as_slot(&real_recv)},
    {"send", as_void(&counting_send), as_slot(&real_send)},
    {"epoll_wait", as_void(&counting_epoll_wait), as_slot(&real_epoll_wait)},
    {"close", as_void(&counting_close), as_slot(&real_close)},
}};

}  // namespace

TEST_CASE("the executable's imports are listed with their GOT slots", "[got]") {
    for (const char* symbol : {"recv", "send", "epoll_wait", "close"}) {
        INFO(symbol);
        CHECK(has_kind(slots_of(symbol), SlotKind::jump_slot));
    }
    const std::vector<Import> getsockopt_slots = slots_of("getsockopt");
    CHECK(has_kind(getsockopt_slots, SlotKind::glob_dat));
#ifdef PG_RDMA_TEST_GOLD
    CHECK(has_kind(getsockopt_slots, SlotKind::jump_slot));  // gold: both kinds for one symbol
#endif
    for (const Import& i : slots_of("recv")) CHECK(*i.slot == libc("recv"));
    CHECK(slots_of("pg_rdma_no_such_function").empty());
}

TEST_CASE("patched calls reach the replacement, and the real function again after restore", "[got]") {
    RestoreAtEnd restore;
    SocketPair pair;
    const PatchResult result = patch_executable_got(kSocketPatches);
    INFO(result.error);
    REQUIRE(result.ok);
    CHECK(result.error.empty());
    CHECK(as_void(real_recv) == libc("recv"));
    CHECK(as_void(real_send) == libc("send"));
    CHECK(as_void(real_epoll_wait) == libc("epoll_wait"));
    CHECK(as_void(real_close) == libc("close"));

    recv_calls = send_calls = epoll_wait_calls = close_calls = 0;
    exchange_byte(pair);
    CHECK(recv_calls == 1);
    CHECK(send_calls == 1);
    const int ep = epoll_create1(EPOLL_CLOEXEC);
    REQUIRE(ep >= 0);
    epoll_event events[1];
    CHECK(epoll_wait(ep, events, 1, 0) == 0);
    CHECK(epoll_wait_calls == 1);
    CHECK(close(ep) == 0);
    CHECK(close_calls == 1);

    REQUIRE(restore_executable_got().ok);
    for (const Import& i : slots_of("recv")) CHECK(*i.slot == libc("recv"));
    exchange_byte(pair);
    CHECK(recv_calls == 1);
    CHECK(send_calls == 1);
}

TEST_CASE("a function whose address the executable takes is redirected through its GLOB_DAT slot", "[got]") {
    RestoreAtEnd restore;
    SocketPair pair;
    const getsockopt_fn taken_before = address_of_getsockopt();
    REQUIRE(as_void(taken_before) == libc("getsockopt"));
    const std::array<Patch, 1> patch = {{{"getsockopt", as_void(&counting_getsockopt), as_slot(&real_getsockopt)}}};
    const PatchResult result = patch_executable_got(patch);
    INFO(result.error);
    REQUIRE(result.ok);
    CHECK(as_void(real_getsockopt) == libc("getsockopt"));
    for (const Import& i : slots_of("getsockopt")) CHECK(*i.slot == as_void(&counting_getsockopt));

    getsockopt_calls = 0;
    int type = 0;
    socklen_t len = sizeof type;
    CHECK(address_of_getsockopt() == &counting_getsockopt);
    CHECK(address_of_getsockopt()(pair.fd[0], SOL_SOCKET, SO_TYPE, &type, &len) == 0);
    CHECK(getsockopt(pair.fd[0], SOL_SOCKET, SO_TYPE, &type, &len) == 0);  // a direct call, PLT or .plt.got
    CHECK(getsockopt_calls == 2);
    CHECK(type == SOCK_STREAM);
    // A pointer loaded before the patch still is the real function.
    CHECK(taken_before(pair.fd[0], SOL_SOCKET, SO_TYPE, &type, &len) == 0);
    CHECK(getsockopt_calls == 2);

    REQUIRE(restore_executable_got().ok);
    CHECK(as_void(address_of_getsockopt()) == libc("getsockopt"));
}

TEST_CASE("a list with a symbol the executable does not import changes nothing and names it", "[got]") {
    RestoreAtEnd restore;
    SocketPair pair;
    const std::vector<Import> before = slots_of("recv");
    recv_fn untouched = reinterpret_cast<recv_fn>(0x1);
    const std::array<Patch, 3> patch = {{
        {"recv", as_void(&counting_recv), as_slot(&untouched)},
        {"pg_rdma_no_such_function", as_void(&counting_recv), nullptr},
        {"pg_rdma_nor_this_one", as_void(&counting_recv), nullptr},
    }};
    const PatchResult result = patch_executable_got(patch);
    CHECK_FALSE(result.ok);
    CHECK(result.error ==
          "nothing patched: not imported by the executable: pg_rdma_no_such_function, pg_rdma_nor_this_one");
    CHECK(untouched == reinterpret_cast<recv_fn>(0x1));
    for (const Import& i : before) CHECK(*i.slot == libc("recv"));
    recv_calls = 0;
    exchange_byte(pair);
    CHECK(recv_calls == 0);
}

TEST_CASE("a list naming a symbol twice, or an entry without replacement, is refused", "[got]") {
    RestoreAtEnd restore;
    const std::array<Patch, 2> twice = {{
        {"recv", as_void(&counting_recv), nullptr},
        {"recv", as_void(&other_recv), nullptr},
    }};
    PatchResult result = patch_executable_got(twice);
    CHECK_FALSE(result.ok);
    CHECK(result.error == "recv is listed twice in the patch list");
    const std::array<Patch, 1> no_replacement = {{{"send", nullptr, nullptr}}};
    result = patch_executable_got(no_replacement);
    CHECK_FALSE(result.ok);
    CHECK(result.error == "patch entry for send has no replacement");
    for (const Import& i : slots_of("recv")) CHECK(*i.slot == libc("recv"));
}

TEST_CASE("the GOT pages are read-only again after patching and after restoring", "[got][relro]") {
    RestoreAtEnd restore;
    const std::vector<Import> slots = slots_of("recv");
    REQUIRE_FALSE(slots.empty());
    for (const Import& i : slots) REQUIRE(test::mapping_permissions(i.slot) == "r--p");  // full RELRO
    REQUIRE(patch_executable_got(kSocketPatches).ok);
    for (const Import& i : slots) {
        CHECK(*i.slot == as_void(&counting_recv));
        CHECK(test::mapping_permissions(i.slot) == "r--p");
    }
    REQUIRE(restore_executable_got().ok);
    for (const Import& i : slots) CHECK(test::mapping_permissions(i.slot) == "r--p");
}

TEST_CASE("a forked child inherits the patched GOT", "[got][fork]") {
    RestoreAtEnd restore;
    SocketPair pair;
    REQUIRE(patch_executable_got(kSocketPatches).ok);
    recv_calls = send_calls = 0;
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        // The child's own calls, counted in the child's copy of the counters.
        const char out = 'c';
        char in = 0;
        const bool moved = send(pair.fd[0], &out, 1, 0) == 1 && recv(pair.fd[1], &in, 1, 0) == 1 && in == 'c';
        _exit(moved && recv_calls == 1 && send_calls == 1 ? 0 : 1);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(recv_calls == 0);  // the parent made no call
}

TEST_CASE("patching again keeps the real function as original; restoring twice is harmless", "[got]") {
    RestoreAtEnd restore;
    SocketPair pair;
    REQUIRE(patch_executable_got(kSocketPatches).ok);
    REQUIRE(patch_executable_got(kSocketPatches).ok);  // the same list again
    CHECK(as_void(real_recv) == libc("recv"));
    recv_fn second_original = nullptr;
    const std::array<Patch, 1> other = {{{"recv", as_void(&other_recv), as_slot(&second_original)}}};
    REQUIRE(patch_executable_got(other).ok);
    CHECK(as_void(second_original) == libc("recv"));  // not counting_recv

    recv_calls = other_recv_calls = 0;
    exchange_byte(pair);
    CHECK(other_recv_calls == 1);
    CHECK(recv_calls == 0);

    REQUIRE(restore_executable_got().ok);
    CHECK(restore_executable_got().ok);
    for (const Import& i : slots_of("recv")) CHECK(*i.slot == libc("recv"));
    for (const Import& i : slots_of("close")) CHECK(*i.slot == libc("close"));
}

TEST_CASE("library_function finds a loaded library's definition and nothing else", "[got]") {
    CHECK(library_function("libc.so.6", "poll") != nullptr);
    CHECK(library_function("libc.so.6", "poll") == dlsym(RTLD_DEFAULT, "poll"));
    CHECK(library_function("libc.so.6", "pg_rdma_no_such_function") == nullptr);
    CHECK(library_function("libpg_rdma_not_loaded.so.1", "recv") == nullptr);
    CHECK(library_function(nullptr, "recv") == nullptr);
}
