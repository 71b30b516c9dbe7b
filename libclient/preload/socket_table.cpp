#include "libclient/preload/socket_table.hpp"

namespace pg_rdma::client {

namespace {
// Constant-initialised: no constructor runs, usable from the first wrapper
// call on, whatever the order of constructors.
constinit SocketTable g_table;
}  // namespace

SocketTable& SocketTable::instance() noexcept { return g_table; }

bool SocketTable::install(int fd, std::unique_ptr<SocketEntry> entry) noexcept {
    if (fd < 0 || fd >= kSlots || !entry) return false;
    SocketEntry* expected = nullptr;
    if (!slots_[fd].compare_exchange_strong(expected, entry.get(), std::memory_order_acq_rel)) return false;
    entry.release();
    count_.fetch_add(1, std::memory_order_acq_rel);
    return true;
}

std::unique_ptr<SocketEntry> SocketTable::take(int fd) noexcept {
    if (fd < 0 || fd >= kSlots) return nullptr;
    SocketEntry* old = slots_[fd].exchange(nullptr, std::memory_order_acq_rel);
    if (old != nullptr) count_.fetch_sub(1, std::memory_order_acq_rel);
    return std::unique_ptr<SocketEntry>(old);
}

}  // namespace pg_rdma::client
