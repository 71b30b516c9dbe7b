// A process that sets up RDMA loads the rdma-core provider of the devices
// present and no other (transport/provider_preload.hpp), and the device
// still works through it. On the real rxe device, in the Soft-RoCE guest.
#include "testing/catch.hpp"

#include <infiniband/verbs.h>
#include <link.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <latch>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "transport/directory.hpp"
#include "transport/error.hpp"
#include "transport/provider_preload.hpp"
#include "transport/rdma_setup.hpp"
#include "transport/settings.hpp"
#include "transport/setup_step.hpp"

namespace transport = pg_rdma::transport;

namespace {

// The provider libraries loaded in this process, by the names they were
// loaded by ("<dir>/libibverbs/lib<name>-rdmav<N>.so"): /proc/self/maps
// would show where a symlinked one (mlx4, mlx5, efa, mana on Debian)
// points instead.
std::set<std::string> loaded_providers() {
    std::set<std::string> found;
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* out) {
            const std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
            const auto dir = name.rfind("/libibverbs/");
            if (dir != std::string::npos) static_cast<std::set<std::string>*>(out)->insert(name.substr(dir + 12));
            return 0;
        },
        &found);
    return found;
}

bool usable() {
    transport::Error err;
    return transport::rdma_usable(transport::Settings{}, transport::SetupSide::Connecting, err);
}

// Devices libibverbs lists: a provider registered twice would not add one,
// but a device it failed to claim would be missing.
int listed_devices() {
    int count = 0;
    ibv_device** list = ibv_get_device_list(&count);
    if (list != nullptr) ibv_free_device_list(list);
    return list != nullptr ? count : -1;
}

// Seconds a forked child may take before its SIGALRM counts as a hang (a
// lock the fork left held).
constexpr unsigned kChildLimitSeconds = 30;

}  // namespace

TEST_CASE("setting up RDMA loads only the provider of the devices present, which then serves them",
          "[rdma][provider_preload]") {
    REQUIRE(loaded_providers().empty());  // a fresh process: nothing asked libibverbs yet
    transport::Error err;
    REQUIRE(transport::rdma_usable(transport::Settings{}, transport::SetupSide::Connecting, err));

    // The guest's devices are all rxe: libibverbs, finding them claimed,
    // loaded none of the 16 other providers it is configured with.
    const auto providers = loaded_providers();
    INFO("providers mapped: " << providers.size());
    REQUIRE(providers.size() == 1);
    CHECK(providers.begin()->starts_with("librxe-rdmav"));

    int count = 0;
    ibv_device** list = ibv_get_device_list(&count);
    REQUIRE(list != nullptr);
    REQUIRE(count >= 1);
    for (int i = 0; i < count; ++i) {
        INFO(ibv_get_device_name(list[i]));
        ibv_context* ctx = ibv_open_device(list[i]);
        REQUIRE(ctx != nullptr);
        ibv_device_attr attr{};
        CHECK(ibv_query_device(ctx, &attr) == 0);
        CHECK(attr.max_qp > 0);
        ibv_close_device(ctx);
    }
    ibv_free_device_list(list);
    CHECK(loaded_providers() == providers);
}

TEST_CASE("threads that set up RDMA at once in a fresh process all succeed and load rxe's provider alone",
          "[rdma][provider_preload]") {
    REQUIRE(loaded_providers().empty());
    const int kernel_devices = transport::count_entries("/sys/class/infiniband");
    REQUIRE(kernel_devices >= 1);

    // A thread that scanned before another's preload ended would have
    // libibverbs load every provider it is configured with.
    constexpr int kThreads = 8;
    std::latch start(kThreads);
    std::atomic<int> succeeded{0};
    std::mutex first_error_lock;
    std::string first_error;
    {
        std::vector<std::jthread> threads;
        for (int i = 0; i < kThreads; ++i)
            threads.emplace_back([&] {
                start.arrive_and_wait();  // all call at once, none ahead of the others
                transport::Error err;
                if (transport::rdma_usable(transport::Settings{}, transport::SetupSide::Connecting, err)) {
                    succeeded.fetch_add(1);
                } else {
                    const std::scoped_lock lock(first_error_lock);
                    if (first_error.empty()) first_error = err.message;
                }
            });
    }

    INFO("first failure: " << first_error);
    CHECK(succeeded.load() == kThreads);
    const auto providers = loaded_providers();
    INFO("providers mapped: " << providers.size());
    REQUIRE(providers.size() == 1);
    CHECK(providers.begin()->starts_with("librxe-rdmav"));
    CHECK(listed_devices() == kernel_devices);
}

TEST_CASE("a fork while another thread preloads leaves the child the lock free and the one provider",
          "[rdma][provider_preload]") {
    REQUIRE(loaded_providers().empty());
    // This thread forks until the other's preload has ended, so forks are
    // asked for before, during and after it. The preload's fork hooks hold
    // its lock across each fork: a fork asked for during the preload waits
    // for it to end, and no child inherits the lock held (where the child's
    // own preload would hang until its alarm) or a provider half loaded.
    // Each child then has the one provider, the parent's or its own.
    enum ChildExit { kHadParents = 0, kLoadedOwn = 3, kWrong = 1, kThrew = 2 };
    constexpr int kMaxForks = 400;
    std::atomic<bool> done{false};
    std::atomic<bool> set_up{false};
    std::vector<pid_t> children;
    int fork_errno = 0;
    {
        const std::jthread setter([&] {
            set_up.store(usable());
            done.store(true);
        });
        for (bool last = false; !last && std::ssize(children) < kMaxForks;) {
            last = done.load();  // one fork more after the preload ended
            const pid_t pid = fork();
            if (pid < 0) {
                fork_errno = errno;  // checked below: the forks stopped short
                break;
            }
            if (pid == 0) {
                // The preload alone: libibverbs' own device scan holds a lock
                // of its own that a fork in the middle of it leaves held in
                // the child (rdma-core's, not made fork-safe by it).
                alarm(kChildLimitSeconds);
                try {
                    const bool had = !loaded_providers().empty();
                    transport::preload_device_providers();
                    if (loaded_providers().size() != 1) _exit(kWrong);
                    _exit(had ? kHadParents : kLoadedOwn);
                } catch (...) {
                    _exit(kThrew);
                }
            }
            children.push_back(pid);
        }
    }
    int had_parents = 0, loaded_own = 0, failed = 0;
    for (const pid_t pid : children) {
        int status = 0;
        const bool reaped = waitpid(pid, &status, 0) == pid;
        if (reaped && WIFEXITED(status) && WEXITSTATUS(status) == kHadParents) {
            ++had_parents;
        } else if (reaped && WIFEXITED(status) && WEXITSTATUS(status) == kLoadedOwn) {
            ++loaded_own;
        } else {
            ++failed;
            UNSCOPED_INFO("child " << pid << (reaped ? " status " : " not reaped, status ") << status);
        }
    }
    INFO(children.size() << " children: " << had_parents << " had the parent's provider, " << loaded_own
                         << " loaded their own, " << failed << " failed");
    INFO("fork: " << std::strerror(fork_errno));
    CHECK(fork_errno == 0);
    CHECK(set_up.load());
    CHECK(loaded_providers().size() == 1);
    CHECK(failed == 0);
    CHECK(had_parents >= 1);  // the fork after the preload ended, at least
}
