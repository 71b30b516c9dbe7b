#include "libclient/preload/socket_table.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>

namespace pg_rdma::client {

namespace {
// Constant-initialised: no constructor runs, usable from the first wrapper
// call on, whatever the order of constructors.
constinit SocketTable g_table;
}  // namespace

SocketTable& SocketTable::instance() noexcept { return g_table; }

bool forked_away(const SocketEntry& entry) noexcept {
    if (entry.state != SocketState::Rdma || !entry.connection || entry.connection->made_in_this_process())
        return false;
    // Per process: a child's child says it again.
    static std::atomic<pid_t> warned{0};
    const pid_t self = getpid();
    if (warned.exchange(self) != self) {
        char line[400];
        const int n = std::snprintf(
            line, sizeof line,
            "libpq_rdma: process %d uses an RDMA connection made before it was forked; a queue pair does not "
            "follow fork(), so the connection cannot be used here. Make the connection in the process that "
            "uses it (pg_basebackup: -X fetch or -X none), or connect with with_rsocket=false\n",
            static_cast<int>(self));
        // Straight to the kernel: this library wraps write().
        if (n > 0) (void)!syscall(SYS_write, 2, line, static_cast<std::size_t>(n) < sizeof line ? n : sizeof line - 1);
    }
    return true;
}

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
