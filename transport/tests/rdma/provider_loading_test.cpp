// A process that sets up RDMA loads the rdma-core provider of the devices
// present and no other (transport/provider_preload.hpp), and the device
// still works through it. On the real rxe device, in the Soft-RoCE guest.
#include <catch2/catch.hpp>

#include <infiniband/verbs.h>
#include <link.h>

#include <set>
#include <string>

#include "transport/error.hpp"
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
