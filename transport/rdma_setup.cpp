// The active side's blocking wrapper and the checks before any setup (see
// rdma_setup.hpp; the listening side is in listener.cpp).
#include "transport/rdma_setup.hpp"

#include <atomic>
#include <cerrno>

#include "transport/cm_events.hpp"
#include "transport/endpoint.hpp"
#include "transport/provider_preload.hpp"

namespace pg_rdma::transport {
namespace {

std::atomic<RdmaLibraryLoader> g_library_loader{nullptr};

}  // namespace

void install_rdma_library_loader(RdmaLibraryLoader loader) noexcept {
    g_library_loader.store(loader, std::memory_order_release);
}

bool rdma_usable(const Settings& settings, SetupSide side, Error& err) noexcept {
    try {
        if (!check_settings(settings, err) || !rdma_setup_possible(side, err)) return false;
        if (const RdmaLibraryLoader load = g_library_loader.load(std::memory_order_acquire); load != nullptr)
            if (const char* why = load(); why != nullptr) return fail(err, ELIBACC, why);
        // Before libibverbs' first scan, which would load every provider.
        preload_device_providers();
        int count = 0;
        ibv_device** list = ibv_get_device_list(&count);
        if (list != nullptr) ibv_free_device_list(list);
        if (count <= 0)
            return fail(err, ENODEV,
                        "no RDMA device found (ibv_get_device_list returned none): load the NIC's "
                        "driver, or for Soft-RoCE run 'rdma link add rxe0 type rxe netdev <if>'");
        return check_memlock(Endpoint::pinned_bytes(settings), err);
    } catch (...) {
        fail_from_exception(err, "rdma_usable");
        return false;
    }
}

std::unique_ptr<Connection> connect(const sockaddr* dst, const protocol::Nonce& nonce, const Settings& settings,
                                    Error& err) noexcept {
    const Deadline deadline = SetupClock::now() + settings.connect_timeout;
    auto connector = Connector::start(dst, nullptr, nonce, settings, deadline, err);
    if (!connector) return nullptr;
    try {
        return run_setup_to_end(*connector, err);
    } catch (...) {
        fail_from_exception(err, "connect");
        return nullptr;
    }
}

}  // namespace pg_rdma::transport
