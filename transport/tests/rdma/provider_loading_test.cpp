// A process that sets up RDMA loads the rdma-core provider of the devices
// present and no other (transport/provider_preload.hpp), and the device
// still works through it. On the real rxe device, in the Soft-RoCE guest.
#include <catch2/catch.hpp>

#include <infiniband/verbs.h>
#include <link.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <latch>
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

TEST_CASE("threads that set up RDMA at once in a fresh process load the provider once and all succeed",
          "[rdma][provider_preload]") {
    REQUIRE(loaded_providers().empty());
    const int kernel_devices = transport::count_entries("/sys/class/infiniband");
    REQUIRE(kernel_devices >= 1);

    constexpr int kThreads = 8;
    std::latch start(kThreads);
    std::atomic<int> succeeded{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i)
        threads.emplace_back([&] {
            start.arrive_and_wait();  // all call at once, none ahead of the others
            if (usable()) succeeded.fetch_add(1);
        });
    for (auto& t : threads) t.join();

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
    // Forks land before, inside and after the other thread's preload; its
    // fork hooks hold its lock across each fork, so no child inherits the
    // lock held or a provider half loaded: each child ends with the one
    // provider, its own or the parent's.
    constexpr int kForks = 12;
    std::atomic<bool> set_up{false};
    std::thread setter([&] { set_up.store(usable()); });
    std::vector<pid_t> children;
    for (int i = 0; i < kForks; ++i) {
        const pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            // The preload alone: libibverbs' own device scan holds a lock of
            // its own that a fork in the middle of it leaves held in the
            // child (rdma-core's, not made fork-safe by it).
            alarm(kChildLimitSeconds);
            transport::preload_device_providers();
            _exit(loaded_providers().size() == 1 ? 0 : 1);
        }
        children.push_back(pid);
        if (i % 3 == 2) std::this_thread::yield();
    }
    setter.join();
    CHECK(set_up.load());
    CHECK(loaded_providers().size() == 1);
    for (const pid_t pid : children) {
        int status = 0;
        REQUIRE(waitpid(pid, &status, 0) == pid);
        INFO("child " << pid << " status " << status);
        CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    }
}
