#include "server_ext/libpq_side/client_library.hpp"

#include <dlfcn.h>
#include <sys/epoll.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <string>

#include "server_ext/interpose/got_patch.hpp"
#include "server_ext/interpose/library_function.hpp"
#include "server_ext/session/install.hpp"
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

State g_state = State::NotTried;  // per process; only ever decided after fork
void* g_handle = nullptr;

// The reason goes to the server log (LOG, not WARNING: a walreceiver retries
// every few seconds and a dblink user need not see it); ereport may
// longjmp, and nothing here needs unwinding.
void log_unusable(const char* reason) noexcept {
    ereport(LOG,
            (errmsg("pg_rdma: this process's libpq connections cannot use RDMA: %s", reason),
             errdetail("Connections with with_rsocket fail with \"invalid connection option\"; the others are "
                       "plain libpq."),
             errhint("Install libpq_rdma.so where pg_rdma.client_library points (it is \"%s\").",
                     client_library_guc())));
}

bool install(char (&reason)[kReasonSize]) noexcept {
    const char* path = client_library_guc();
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
    // The executable's waits on PQsocket(), and its close() of a wait set
    // (FreeWaitEventSet), which must drop the library's registrations of
    // that epoll descriptor before the number is reused.
    auto* ctl = reinterpret_cast<int (*)(int, int, int, epoll_event*)>(dlsym(g_handle, "epoll_ctl"));
    auto* wait = reinterpret_cast<int (*)(int, epoll_event*, int, int)>(dlsym(g_handle, "epoll_wait"));
    auto* close_fd = reinterpret_cast<int (*)(int)>(dlsym(g_handle, "close"));
    if (ctl == nullptr || wait == nullptr || close_fd == nullptr) {
        snprintf(reason, sizeof reason, "%s does not export epoll_ctl/epoll_wait/close", path);
        return false;
    }
    if (session_hooks_installed()) {
        // The session hooks own the executable's slots and pass everything
        // that is not the client session to these.
        RealCalls& real = real_calls();
        real.epoll_ctl = ctl;
        real.epoll_wait = wait;
        real.close = close_fd;
        return true;
    }
    const std::array waits{interpose::Patch{"epoll_ctl", reinterpret_cast<void*>(ctl), nullptr},
                           interpose::Patch{"epoll_wait", reinterpret_cast<void*>(wait), nullptr},
                           interpose::Patch{"close", reinterpret_cast<void*>(close_fd), nullptr}};
    const interpose::PatchResult exe = interpose::patch_executable_got(waits);
    if (!exe.ok) {
        snprintf(reason, sizeof reason, "postgres: %s", exe.error.c_str());
        return false;
    }
    return true;
}

}  // namespace

State client_state() noexcept {
    // The postmaster (a preloaded library's check hook, say) gets plain
    // libpq and decides nothing: its children would inherit the choice.
    if (g_state != State::NotTried || !IsUnderPostmaster) return g_state;
    if (client_library_guc()[0] == '\0') return g_state = State::Unusable;  // off, silently
    char reason[kReasonSize] = {};
    g_state = install(reason) ? State::Ready : State::Unusable;
    if (g_state == State::Unusable) log_unusable(reason);
    return g_state;
}

void* client_function(const char* name) noexcept {
    return client_state() == State::Ready ? dlsym(g_handle, name) : nullptr;
}

namespace {

using ProxyCheck = bool (*)(const char*);
ProxyCheck g_real_proxy_check = nullptr;
unsigned long long g_scanned_generation = 0;  // the loader's, at the last scan
bool g_proxy_patch_failed = false;

bool is_valid_proxy_option(const char* keyword) {
    if (keyword != nullptr && std::strcmp(keyword, "with_rsocket") == 0) return true;
    return g_real_proxy_check != nullptr && g_real_proxy_check(keyword);
}

}  // namespace

void allow_with_rsocket_in_proxy_checks() noexcept {
    if (g_state != State::Ready || g_proxy_patch_failed) return;
    // Only libraries loaded since the last scan can need it.
    const unsigned long long generation = interpose::loaded_objects_generation();
    if (generation != 0 && generation == g_scanned_generation) return;
    if (g_real_proxy_check == nullptr) {
        g_real_proxy_check = reinterpret_cast<ProxyCheck>(dlsym(RTLD_DEFAULT, "libpqsrv_is_valid_proxy_option"));
        if (g_real_proxy_check == nullptr) {  // before 15.14: no check to teach
            g_scanned_generation = generation;
            return;
        }
    }
    char error[kReasonSize] = {};
    try {
        std::string why;
        if (interpose::patch_imports_everywhere("libpqsrv_is_valid_proxy_option",
                                                reinterpret_cast<void*>(&is_valid_proxy_option), why) < 0) {
            g_proxy_patch_failed = true;
            snprintf(error, sizeof error, "%s", why.c_str());
        } else {
            g_scanned_generation = generation;
        }
    } catch (...) {
        g_proxy_patch_failed = true;
        snprintf(error, sizeof error, "out of memory");
    }
    if (g_proxy_patch_failed)  // once per process; nothing above needs unwinding
        ereport(LOG, (errmsg("pg_rdma: cannot let with_rsocket through the server's connection option check: %s",
                             error)));
}

void warn_if_libpq_loaded_first() noexcept {
    void* loaded = dlopen(kLibpq, RTLD_LAZY | RTLD_NOLOAD);
    if (loaded == nullptr) return;
    dlclose(loaded);
    ereport(WARNING,
            (errmsg("pg_rdma: libpq was loaded before pg_rdma, so this server's own libpq connections "
                    "(replication, postgres_fdw, dblink) cannot use with_rsocket"),
             errhint("Put pg_rdma first in shared_preload_libraries.")));
}

void* libpq_function(const char* name) noexcept { return interpose::library_function(kLibpq, name); }

}  // namespace pg_rdma::server
