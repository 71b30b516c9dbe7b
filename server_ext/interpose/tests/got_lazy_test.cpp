// GOT patching in a program linked with lazy binding and partial RELRO
// (-z lazy -z relro), as a postgres built from source without -z now is: a
// slot the loader has not bound yet (its content is a PLT stub, not the real
// function) is patched with the function the loader would have bound kept
// as the original, and a writable .got.plt stays writable.
// meson runs it with LD_BIND_NOW empty, so binding really is lazy.
#include "testing/catch.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <string>

#include "server_ext/interpose/got_patch.hpp"
#include "server_ext/interpose/library_function.hpp"
#include "server_ext/interpose/tests/maps.hpp"

using namespace pg_rdma::interpose;

namespace {

using epoll_create1_fn = int (*)(int);
using socketpair_fn = int (*)(int, int, int, int*);

epoll_create1_fn real_epoll_create1;
socketpair_fn real_socketpair;
int epoll_create1_calls, socketpair_calls;

int counting_epoll_create1(int flags) {
    ++epoll_create1_calls;
    return real_epoll_create1(flags);
}
int counting_socketpair(int domain, int type, int protocol, int* fds) {
    ++socketpair_calls;
    return real_socketpair(domain, type, protocol, fds);
}

template <typename F>
void* as_void(F f) {
    return reinterpret_cast<void*>(f);
}

struct RestoreAtEnd {
    ~RestoreAtEnd() { restore_executable_got(); }
};

void** jump_slot_of(const char* symbol) {
    const ImportsResult imports = executable_imports();
    REQUIRE(imports.ok);
    for (const Import& i : imports.imports)
        if (i.symbol == symbol && i.kind == SlotKind::jump_slot) return i.slot;
    FAIL("no JUMP_SLOT for " << symbol);
    return nullptr;
}

}  // namespace

TEST_CASE("a slot not bound yet is patched, keeping the function the loader would bind", "[got][lazy]") {
    RestoreAtEnd restore;
    // Nothing in this program calls epoll_create1 before this line.
    void** slot = jump_slot_of("epoll_create1");
    void* const libc_epoll_create1 = library_function("libc.so.6", "epoll_create1");
    REQUIRE(*slot != libc_epoll_create1);  // still the PLT stub
    const std::array<Patch, 1> patch = {{{"epoll_create1", as_void(&counting_epoll_create1),
                                          reinterpret_cast<void**>(&real_epoll_create1)}}};
    const PatchResult result = patch_executable_got(patch);
    INFO(result.error);
    REQUIRE(result.ok);
    CHECK(as_void(real_epoll_create1) == libc_epoll_create1);
    CHECK(*slot == as_void(&counting_epoll_create1));

    // The first call goes to the replacement, not to the loader's resolver
    // (which would bind the slot to libc and undo the patch).
    epoll_create1_calls = 0;
    for (int i = 0; i < 2; ++i) {
        const int ep = epoll_create1(EPOLL_CLOEXEC);
        CHECK(ep >= 0);
        close(ep);
    }
    CHECK(epoll_create1_calls == 2);
    CHECK(*slot == as_void(&counting_epoll_create1));

    // Restored, the slot holds libc's function, as if the call had bound it.
    REQUIRE(restore_executable_got().ok);
    CHECK(*slot == libc_epoll_create1);
    const int ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK(ep >= 0);
    close(ep);
    CHECK(epoll_create1_calls == 2);
}

TEST_CASE("a slot outside RELRO stays writable after patching", "[got][lazy]") {
    RestoreAtEnd restore;
    int fds[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);  // binds the slot
    close(fds[0]);
    close(fds[1]);
    void** slot = jump_slot_of("socketpair");
    REQUIRE(test::mapping_permissions(slot) == "rw-p");  // .got.plt under partial RELRO
    const std::array<Patch, 1> patch = {{{"socketpair", as_void(&counting_socketpair),
                                          reinterpret_cast<void**>(&real_socketpair)}}};
    const PatchResult result = patch_executable_got(patch);
    INFO(result.error);
    REQUIRE(result.ok);
    CHECK(test::mapping_permissions(slot) == "rw-p");
    socketpair_calls = 0;
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    close(fds[0]);
    close(fds[1]);
    CHECK(socketpair_calls == 1);
    REQUIRE(restore_executable_got().ok);
    CHECK(test::mapping_permissions(slot) == "rw-p");
    CHECK(*slot == library_function("libc.so.6", "socketpair"));
}
