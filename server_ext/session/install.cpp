#include "server_ext/session/install.hpp"

#include <array>
#include <cstdio>

#include "server_ext/interpose/got_patch.hpp"
#include "server_ext/session/rdma_address.hpp"
#include "server_ext/session/real_calls.hpp"
#include "server_ext/session/row_claim.hpp"
#include "server_ext/session/socket_hooks.hpp"
#include "server_ext/settings_gucs.hpp"

#include "server_ext/pg_headers.hpp"

namespace pg_rdma::server {
namespace {

constexpr std::size_t kErrorSize = 512;  // bytes of the reason in the WARNING
bool g_installed = false;  // set in the postmaster, inherited by every child

// Patches; on failure copies the reason into `error`. No PostgreSQL error.
bool patch(char (&error)[kErrorSize]) noexcept {
    RealCalls& real = real_calls();
    RealCalls found{};
    const std::array patches{
        interpose::Patch{"recv", reinterpret_cast<void*>(&hook_recv), reinterpret_cast<void**>(&found.recv)},
        interpose::Patch{"send", reinterpret_cast<void*>(&hook_send), reinterpret_cast<void**>(&found.send)},
        interpose::Patch{"close", reinterpret_cast<void*>(&hook_close), reinterpret_cast<void**>(&found.close)},
        interpose::Patch{"epoll_ctl", reinterpret_cast<void*>(&hook_epoll_ctl),
                         reinterpret_cast<void**>(&found.epoll_ctl)},
        interpose::Patch{"epoll_wait", reinterpret_cast<void*>(&hook_epoll_wait),
                         reinterpret_cast<void**>(&found.epoll_wait)},
    };
    const interpose::PatchResult result = interpose::patch_executable_got(patches);
    if (!result.ok) {
        snprintf(error, sizeof error, "%s", result.error.c_str());
        return false;
    }
    real = found;
    g_installed = true;
    return true;
}

}  // namespace

bool session_hooks_installed() noexcept { return g_installed; }

void install_session_hooks() {
    const char* list = rdma_listen_addresses_guc();
    if (list == nullptr || list[0] == '\0') return;
    remember_rdma_addresses(list);
    install_row_claim_hook();
    char error[kErrorSize] = {};
    if (patch(error)) return;
    ereport(WARNING,
            (errmsg("pg_rdma: cannot take over the server's socket calls: %s", error),
             errdetail("RDMA sessions are disabled; the addresses in pg_rdma.listen_addresses serve TCP only."),
             errhint("The reason says what is missing. Calls this postgres does not import at all mean an "
                     "executable pg_rdma was not built for: report its version and build.")));
}

}  // namespace pg_rdma::server
