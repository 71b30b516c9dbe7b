// Which rdma-core provider a kernel driver needs.
#include "testing/catch.hpp"

#include <rdma/ib_user_ioctl_verbs.h>
#include <sys/stat.h>

#include <string>

#include "transport/provider_preload.hpp"

using pg_rdma::transport::provider_for_driver;

TEST_CASE("each kernel RDMA driver with an rdma-core provider maps to that provider's configured name",
          "[provider_preload]") {
    CHECK(provider_for_driver(RDMA_DRIVER_RXE) == "rxe");
    CHECK(provider_for_driver(RDMA_DRIVER_MLX5) == "mlx5");
    CHECK(provider_for_driver(RDMA_DRIVER_IRDMA) == "irdma");
    CHECK(provider_for_driver(RDMA_DRIVER_QIB) == "ipathverbs");
    CHECK(provider_for_driver(RDMA_DRIVER_HFI1) == "hfi1verbs");
    // No provider in rdma-core, or not known to this build: the preload
    // leaves every provider to libibverbs.
    CHECK_FALSE(provider_for_driver(RDMA_DRIVER_UNKNOWN));
    CHECK_FALSE(provider_for_driver(RDMA_DRIVER_USNIC));
    CHECK_FALSE(provider_for_driver(RDMA_DRIVER_CXGB3));
    CHECK(provider_for_driver(20) == "mana");  // Linux 6.2's id, newer than these headers
    CHECK_FALSE(provider_for_driver(1000));
}

TEST_CASE("every provider name matches a driver file of the installed rdma-core", "[provider_preload]") {
    // ibverbs-providers is one of the packages scripts/test installs: a
    // name that is not configured would never be preloaded.
    for (std::uint32_t id = 0; id < 64; ++id) {
        const auto name = provider_for_driver(id);
        if (!name) continue;
        const std::string file = "/etc/libibverbs.d/" + std::string(*name) + ".driver";
        struct stat st{};
        INFO(file);
        CHECK(stat(file.c_str(), &st) == 0);
    }
}

