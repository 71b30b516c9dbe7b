#include "server_ext/libpq_side/client_library.hpp"

#include <dlfcn.h>
#include <sys/epoll.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <string>

#include "server_ext/interpose/got_patch.hpp"
#include "server_ext/interpose/library_function.hpp"
#include "server_ext/session/real_calls.hpp"
#include "server_ext/settings_gucs.hpp"

#include "server_ext/pg_headers.hpp"

namespace pg_rdma::server {
namespace {

constexpr const char* kLibpq = "libpq.so.5";
constexpr const char* kLibpqSuffix = "/libpq.so.5";
constexpr std::size_t kReasonSize = 512;

// libpq's socket and file calls that the client library answers.
constexpr std::array kLibpqCalls{"connect", "close", "recv",       "send",        "read",
                                 "write",   "poll",  "getsockopt", "setsockopt", "getsockname"};

enum class State { NotTried, Ready, Unusable };
State g_state = State::NotTried;  // per process: a fork copies Ready with the patches it made
void* g_handle = nullptr;

void warn_once(const char* reason) noexcept {
    // ereport may longjmp; nothing here needs unwinding.
    ereport(WARNING,
            (errmsg("pg_rdma: this process's libpq connections cannot use RDMA: %s", reason),
             errdetail("Connections with with_rsocket fail with \"invalid connection option\"; the others are "
                       "plain libpq."),
             errhint("Install libpq_rdma.so where pg_rdma.client_library points (it is \"%s\").",
                     client_library_guc())));
}

bool install(char (&reason)[kReasonSize]) noexcept {
    const char* path = client_library_guc();
    if (path[0] == '\0') {
        snprintf(reason, sizeof reason, "pg_rdma.client_library is empty");
        return false;
    }
    g_handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (g_handle == nullptr) {
        snprintf(reason, sizeof reason, "dlopen(%s): %s", path, dlerror());
        return false;
    }
    // libpq's calls.
    std::array<interpose::Patch, kLibpqCalls.size() + 1> patches{};
    for (std::size_t i = 0; i < kLibpqCalls.size(); ++i) {
        void* f = dlsym(g_handle, kLibpqCalls[i]);
        if (f == nullptr) {
            snprintf(reason, sizeof reason, "%s does not export %s", path, kLibpqCalls[i]);
            return false;
        }
        patches[i] = interpose::Patch{kLibpqCalls[i], f, nullptr};
    }
    void* fopen_wrapper = dlsym(g_handle, "fopen");
    if (fopen_wrapper == nullptr) {
        snprintf(reason, sizeof reason, "%s does not export fopen", path);
        return false;
    }
    patches[kLibpqCalls.size()] = interpose::Patch{"fopen", fopen_wrapper, nullptr};
    const interpose::PatchResult lib = interpose::patch_library_got(kLibpqSuffix, patches);
    if (!lib.ok) {
        snprintf(reason, sizeof reason, "libpq.so.5: %s", lib.error.c_str());
        return false;
    }
    // The executable's waits on PQsocket().
    auto* ctl = reinterpret_cast<int (*)(int, int, int, epoll_event*)>(dlsym(g_handle, "epoll_ctl"));
    auto* wait = reinterpret_cast<int (*)(int, epoll_event*, int, int)>(dlsym(g_handle, "epoll_wait"));
    if (ctl == nullptr || wait == nullptr) {
        snprintf(reason, sizeof reason, "%s does not export epoll_ctl/epoll_wait", path);
        return false;
    }
    RealCalls& real = real_calls();
    if (real.close != nullptr) {
        // The session hooks own the executable's slots and pass everything
        // that is not the client session to these.
        real.epoll_ctl = ctl;
        real.epoll_wait = wait;
        return true;
    }
    const std::array waits{interpose::Patch{"epoll_ctl", reinterpret_cast<void*>(ctl), nullptr},
                           interpose::Patch{"epoll_wait", reinterpret_cast<void*>(wait), nullptr}};
    const interpose::PatchResult exe = interpose::patch_executable_got(waits);
    if (!exe.ok) {
        snprintf(reason, sizeof reason, "postgres: %s", exe.error.c_str());
        return false;
    }
    return true;
}

}  // namespace

void* client_function(const char* name) noexcept {
    if (g_state == State::NotTried) {
        char reason[kReasonSize] = {};
        g_state = install(reason) ? State::Ready : State::Unusable;
        if (g_state == State::Unusable) warn_once(reason);
    }
    return g_state == State::Ready ? dlsym(g_handle, name) : nullptr;
}

namespace {

using ProxyCheck = bool (*)(const char*);
ProxyCheck g_real_proxy_check = nullptr;

extern "C" bool pg_rdma_is_valid_proxy_option(const char* keyword) {
    if (keyword != nullptr && std::strcmp(keyword, "with_rsocket") == 0) return true;
    return g_real_proxy_check != nullptr && g_real_proxy_check(keyword);
}

}  // namespace

void allow_with_rsocket_in_proxy_checks() noexcept {
    if (g_state != State::Ready) return;
    static bool present = true;  // false once known to be absent (before 15.14)
    if (!present) return;
    if (g_real_proxy_check == nullptr) {
        g_real_proxy_check = reinterpret_cast<ProxyCheck>(dlsym(RTLD_DEFAULT, "libpqsrv_is_valid_proxy_option"));
        if (g_real_proxy_check == nullptr) {
            present = false;
            return;
        }
    }
    try {
        std::string error;
        if (interpose::patch_imports_everywhere("libpqsrv_is_valid_proxy_option",
                                                reinterpret_cast<void*>(&pg_rdma_is_valid_proxy_option), error) < 0)
            ereport(WARNING, (errmsg("pg_rdma: cannot let with_rsocket through the server's connection option "
                                     "check: %s", error.c_str())));
    } catch (...) {
    }
}

void* libpq_function(const char* name) noexcept { return interpose::library_function(kLibpq, name); }

}  // namespace pg_rdma::server
