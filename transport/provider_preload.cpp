// Loading only the providers this host's devices need (see provider_preload.hpp).
#include "transport/provider_preload.hpp"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "transport/directory.hpp"
#include "transport/rdma_netlink.hpp"

namespace pg_rdma::transport {
namespace {

// Where rdma-core reads which providers to load (its IBV_CONFIG_DIR, fixed
// when libibverbs is built; this on Debian, Fedora and SUSE). Elsewhere it
// is missing here and nothing is preloaded.
constexpr char kConfigDir[] = "/etc/libibverbs.d";
// Newer than Debian 12's kernel headers (Linux 6.2's enum rdma_driver_id),
// with a provider in rdma-core 44 that matches by it.
constexpr std::uint32_t kDriverMana = 20;
// The file name libibverbs is loaded under, versioned or not ("libibverbs.so.1").
constexpr std::string_view kVerbsLibrary = "libibverbs.so";

// The provider names rdma-core's configuration lists ("driver NAME" lines),
// or nothing when it names one by path (a provider outside the usual
// directory, which only libibverbs' own loading would find) or cannot be read.
std::optional<std::set<std::string>> configured_providers() {
    const Directory dir = open_directory(kConfigDir);
    if (!dir) return std::nullopt;
    std::set<std::string> names;
    bool by_path = false;
    while (const dirent* entry = readdir(dir.get())) {
        if (entry->d_name[0] == '.') continue;
        std::ifstream file(std::string(kConfigDir) + "/" + entry->d_name);
        for (std::string line; std::getline(file, line);) {
            std::istringstream words(line);
            std::string keyword, name;
            if (!(words >> keyword >> name) || keyword != "driver") continue;
            if (name.starts_with('/')) by_path = true;
            names.insert(name);
        }
    }
    if (by_path) return std::nullopt;
    return names;
}

// Where libibverbs looks for providers: "libibverbs" beside the loaded
// libibverbs.so (how rdma-core installs them). The path is copied inside
// the loader's lock into a fixed buffer: nothing that could throw runs there.
std::optional<std::string> provider_directory() {
    std::array<char, PATH_MAX> library{};
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* out) noexcept {
            const char* name = info->dlpi_name != nullptr ? info->dlpi_name : "";
            const char* slash = std::strrchr(name, '/');
            if (slash == nullptr || std::strncmp(slash + 1, kVerbsLibrary.data(), kVerbsLibrary.size()) != 0) return 0;
            auto& dir = *static_cast<std::array<char, PATH_MAX>*>(out);
            const auto length = static_cast<std::size_t>(slash - name);
            if (length >= dir.size()) return 1;  // left empty: no preload
            std::memcpy(dir.data(), name, length);
            dir[length] = '\0';
            return 1;
        },
        &library);
    if (library[0] == '\0') return std::nullopt;
    return std::string(library.data()) + "/libibverbs";
}

// The one provider file of `provider` ("lib<name>-rdmav<ABI>.so"), or
// nothing when there is none or more than one.
std::optional<std::string> provider_file(const std::string& directory, std::string_view provider) {
    const Directory dir = open_directory(directory.c_str());
    if (!dir) return std::nullopt;
    const std::string prefix = "lib" + std::string(provider) + "-rdmav";
    std::optional<std::string> found;
    int matches = 0;
    while (const dirent* entry = readdir(dir.get())) {
        const std::string_view name = entry->d_name;
        if (!name.starts_with(prefix) || !name.ends_with(".so")) continue;
        // The ABI number, digits only: "libmlx5-rdmav34.so", not "libmlx5-rdmav34-foo.so".
        const auto digits = name.substr(prefix.size(), name.size() - prefix.size() - 3);
        if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) continue;
        ++matches;
        found = directory + "/" + std::string(name);
    }
    return matches == 1 ? found : std::nullopt;
}

void preload(const std::string& directory) {
    // rdma-core loads these before its configured providers: they may name
    // a provider of the same device that must win. Read as libibverbs reads
    // them (not for a setuid program).
    if (getuid() == geteuid() && (std::getenv("RDMAV_DRIVERS") != nullptr || std::getenv("IBV_DRIVERS") != nullptr))
        return;
    const auto drivers = rdma_device_drivers();
    if (!drivers || drivers->empty()) return;
    const auto configured = configured_providers();
    if (!configured) return;
    std::vector<std::string> files;
    for (const std::uint32_t id : *drivers) {
        const auto provider = provider_for_driver(id);
        if (!provider || configured->count(std::string(*provider)) == 0) return;
        auto file = provider_file(directory, *provider);
        if (!file) return;
        files.push_back(std::move(*file));
    }
    // Loaded as libibverbs loads them; never unloaded, as theirs are not.
    // Each one's constructor registers it with libibverbs.
    for (const std::string& file : files) (void)dlopen(file.c_str(), RTLD_NOW);
}

// Held across the preload: a provider's constructor appends to libibverbs'
// driver list without a lock, and another thread's device scan walks it.
// A fork() takes it first, so no child inherits it held.
pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
bool g_done = false;  // under g_lock

void lock_for_fork() { pthread_mutex_lock(&g_lock); }
void unlock_after_fork() { pthread_mutex_unlock(&g_lock); }
[[maybe_unused]] const bool g_fork_hooks = (pthread_atfork(&lock_for_fork, &unlock_after_fork, &unlock_after_fork), true);

}  // namespace

std::optional<std::string_view> provider_for_driver(std::uint32_t driver_id) noexcept {
    // The kernel's enum rdma_driver_id (a stable UAPI) to the provider that
    // rdma-core's configuration names for it. Drivers with no provider in
    // rdma-core (cxgb3, nes, usnic) and ids newer than these are unknown:
    // libibverbs then loads every provider.
    switch (driver_id) {
        case RDMA_DRIVER_MLX5: return "mlx5";
        case RDMA_DRIVER_MLX4: return "mlx4";
        case RDMA_DRIVER_CXGB4: return "cxgb4";
        case RDMA_DRIVER_MTHCA: return "mthca";
        case RDMA_DRIVER_BNXT_RE: return "bnxt_re";
        case RDMA_DRIVER_OCRDMA: return "ocrdma";
        case RDMA_DRIVER_IRDMA: return "irdma";
        case RDMA_DRIVER_VMW_PVRDMA: return "vmw_pvrdma";
        case RDMA_DRIVER_QEDR: return "qedr";
        case RDMA_DRIVER_HNS: return "hns";
        case RDMA_DRIVER_RXE: return "rxe";
        case RDMA_DRIVER_HFI1: return "hfi1verbs";
        case RDMA_DRIVER_QIB: return "ipathverbs";
        case RDMA_DRIVER_EFA: return "efa";
        case RDMA_DRIVER_SIW: return "siw";
        case RDMA_DRIVER_ERDMA: return "erdma";
        case kDriverMana: return "mana";
        default: return std::nullopt;
    }
}

void preload_device_providers() noexcept {
    const int saved_errno = errno;
    pthread_mutex_lock(&g_lock);
    try {
        if (!g_done) {
            // Not yet loaded (libpq_rdma.so loads it on first use): a later
            // call tries again.
            if (const auto directory = provider_directory()) {
                g_done = true;
                preload(*directory);
            }
        }
    } catch (...) {
        // Out of memory: libibverbs loads every provider, as without this.
    }
    pthread_mutex_unlock(&g_lock);
    errno = saved_errno;
}

}  // namespace pg_rdma::transport
