#include "libclient/preload/libpq_calls.hpp"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "libclient/preload/libc_calls.hpp"
#include "server_ext/interpose/library_function.hpp"

namespace pg_rdma::client {
namespace {

// Distinct libpq copies one process may hold; more are used unwrapped.
constexpr std::size_t kMaxLibpqs = 8;
// Calling objects remembered with the libpq they reach.
constexpr std::size_t kMaxCallers = 32;

struct Known {
    const void* base = nullptr;  // the libpq object's load address
    LibpqCalls calls{};
};
struct Caller {
    const void* base = nullptr;  // the calling object's load address
    const LibpqCalls* calls = nullptr;
};

std::mutex g_mutex;  // guards the tables below (wrappers of PQconnect* only, never signal handlers)
std::array<Known, kMaxLibpqs> g_known;
std::size_t g_known_count = 0;
std::array<Caller, kMaxCallers> g_callers;
std::size_t g_callers_count = 0;

// The global scope's libpq, once found: every caller binds to it first, so
// the common case costs one atomic load.
std::atomic<const LibpqCalls*> g_global{nullptr};

__attribute__((tls_model("initial-exec"))) thread_local const LibpqCalls* t_current = nullptr;

void say(const char* a, const char* b, const char* c) noexcept {
    for (const char* s : {a, b, c})
        if (s != nullptr) (void)!libc_syscall()(SYS_write, 2, s, std::strlen(s));
}

const void* object_base(const void* address) noexcept {
    Dl_info info{};
    return address != nullptr && dladdr(address, &info) != 0 ? info.dli_fbase : nullptr;
}

bool is_ours(const void* address) noexcept {
    static const void* const ours = object_base(reinterpret_cast<const void*>(&object_base));
    return object_base(address) == ours;
}

template <typename F>
bool bind(F& slot, void* handle, const char* name) noexcept {
    slot = reinterpret_cast<F>(dlsym(handle, name));
    return slot != nullptr;
}

// Every function, from the object that defines `connectdb` (and its own
// dependencies: dlsym on its handle).
void resolve_from(void* connectdb, LibpqCalls& c) noexcept {
    Dl_info info{};
    c = LibpqCalls{};
    if (dladdr(connectdb, &info) == 0 || info.dli_fname == nullptr) return;
    // RTLD_NOLOAD loads nothing; the reference taken is kept on purpose, so
    // the copy these pointers are into stays as long as they do.
    void* handle = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) return;
    bool all = true;
    all &= bind(c.PQconnectdb, handle, "PQconnectdb");
    all &= bind(c.PQconnectdbParams, handle, "PQconnectdbParams");
    all &= bind(c.PQconnectStart, handle, "PQconnectStart");
    all &= bind(c.PQconnectStartParams, handle, "PQconnectStartParams");
    all &= bind(c.PQsetdbLogin, handle, "PQsetdbLogin");
    all &= bind(c.PQconnectPoll, handle, "PQconnectPoll");
    all &= bind(c.PQfinish, handle, "PQfinish");
    all &= bind(c.PQsocket, handle, "PQsocket");
    all &= bind(c.PQstatus, handle, "PQstatus");
    all &= bind(c.PQerrorMessage, handle, "PQerrorMessage");
    all &= bind(c.PQhost, handle, "PQhost");
    all &= bind(c.PQport, handle, "PQport");
    all &= bind(c.PQconninfo, handle, "PQconninfo");
    all &= bind(c.PQconninfoParse, handle, "PQconninfoParse");
    all &= bind(c.PQconndefaults, handle, "PQconndefaults");
    all &= bind(c.PQconninfoFree, handle, "PQconninfoFree");
    all &= bind(c.resetPQExpBuffer, handle, "resetPQExpBuffer");
    all &= bind(c.appendPQExpBufferStr, handle, "appendPQExpBufferStr");
    // The handle's scope could hand back one of ours (a libpq that is itself
    // linked against this library): never forward to ourselves.
    if (is_ours(reinterpret_cast<void*>(c.PQconnectdb))) c = LibpqCalls{};
    c.complete = all && c.PQconnectdb != nullptr;
}

// The definition of PQconnectdb among the dependencies of the object at
// `caller` (dlsym on its handle searches the object and what it needs,
// not the global scope).
// Whether the object defining `connectdb` is a libpq: one defines
// PQlibVersion too. A forwarder is not (pg_rdma.so's trampolines define
// PQconnectdb and call us from their own code: taking them for the
// caller's libpq would make us call back into them).
bool defined_by_a_libpq(void* connectdb) noexcept {
    Dl_info info{};
    if (dladdr(connectdb, &info) == 0 || info.dli_fname == nullptr) return false;
    void* handle = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) return false;
    void* version = dlsym(handle, "PQlibVersion");
    dlclose(handle);
    return version != nullptr && object_base(version) == object_base(connectdb);
}

void* local_connectdb_for(const void* caller) noexcept {
    Dl_info info{};
    if (caller == nullptr || dladdr(caller, &info) == 0 || info.dli_fname == nullptr || info.dli_fname[0] == '\0')
        return nullptr;
    void* handle = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) return nullptr;
    void* f = dlsym(handle, "PQconnectdb");
    dlclose(handle);
    return f != nullptr && !is_ours(f) && defined_by_a_libpq(f) ? f : nullptr;
}

// Under g_mutex: the kept entry for the libpq defining `connectdb`.
const LibpqCalls* known_for(void* connectdb) noexcept {
    const void* base = object_base(connectdb);
    for (std::size_t i = 0; i < g_known_count; ++i)
        if (g_known[i].base == base) return &g_known[i].calls;
    if (g_known_count == kMaxLibpqs) return nullptr;
    Known& k = g_known[g_known_count];
    resolve_from(connectdb, k.calls);
    if (k.calls.PQconnectdb == nullptr) return nullptr;
    k.base = base;
    ++g_known_count;
    return &k.calls;
}

}  // namespace

const LibpqCalls* libpq_for(const void* caller) noexcept {
    if (const LibpqCalls* global = g_global.load(std::memory_order_acquire)) return global;
    // In the global scope after us: what every caller binds to first. Kept
    // once found (a libpq loaded later with RTLD_GLOBAL is found then).
    if (void* f = dlsym(RTLD_NEXT, "PQconnectdb"); f != nullptr && !is_ours(f)) {
        std::lock_guard lock(g_mutex);
        const LibpqCalls* found = known_for(f);
        if (found != nullptr) g_global.store(found, std::memory_order_release);
        return found;
    }
    const void* base = object_base(caller);
    std::lock_guard lock(g_mutex);
    for (std::size_t i = 0; i < g_callers_count; ++i)
        if (g_callers[i].base == base) return g_callers[i].calls;
    void* f = local_connectdb_for(caller);
    // Last: a libpq.so.5 that some module loaded for itself.
    if (f == nullptr) f = interpose::library_function("libpq.so.5", "PQconnectdb");
    const LibpqCalls* found = f != nullptr ? known_for(f) : nullptr;
    if (base != nullptr && found != nullptr && g_callers_count < kMaxCallers) g_callers[g_callers_count++] = {base, found};
    return found;
}

LibpqScope::LibpqScope(const LibpqCalls& calls) noexcept : previous_(t_current) { t_current = &calls; }
LibpqScope::~LibpqScope() { t_current = previous_; }

const LibpqCalls& libpq() noexcept {
    if (t_current != nullptr) return *t_current;
    // Unreachable from the exported wrappers (each opens a scope first).
    say("libpq_rdma: internal error: libpq used outside a wrapper\n", nullptr, nullptr);
    std::abort();
}

void warn_libpq_once(std::atomic<bool>& said, const char* function, const char* what) noexcept {
    if (said.exchange(true)) return;
    say("libpq_rdma: ", function, what);
}

}  // namespace pg_rdma::client
