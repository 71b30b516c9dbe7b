// Which descriptors this library looks after, and in what state.
//
// Only sockets of connection attempts that asked for RDMA (with_rsocket not
// off) ever get an entry; a wrapper that finds none forwards to libc at the
// cost of one atomic load. Lookups take no lock and allocate nothing, so
// close/send/recv/connect stay async-signal-safe for every other descriptor
// (PQcancel's socket, made in a signal handler, never has an entry).
//
// One PGconn is used by one thread at a time (libpq's rule), and so is its
// socket's entry: entries are created, changed and removed by the thread
// driving that connection.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <memory>
#include <string>

#include "transport/connection.hpp"
#include "transport/settings.hpp"
#include "transport/tcp_upgrade.hpp"

namespace pg_rdma::client {

enum class SocketState {
    Connecting,    // libpq's TCP connect is under way; the upgrade comes next
    Upgrading,     // the upgrade exchange owns the socket; libpq waits
    Reconnecting,  // a second TCP connect (server without pg_rdma); then plain
    Rdma,          // the number is the transport's fd; the session is on RDMA
    Failed,        // RDMA required and impossible: libpq must give up on it
};

struct SocketEntry {
    SocketState state = SocketState::Connecting;
    transport::Mode mode = transport::Mode::Prefer;
    sockaddr_storage peer{};  // where libpq connected, for a reconnect
    socklen_t peer_len = 0;
    transport::Deadline armed{};  // when libpq's connect() was made: its connect_timeout counts from about then
    std::unique_ptr<transport::ClientUpgrade> upgrade;  // Upgrading
    std::unique_ptr<transport::Connection> connection;  // Rdma
    int tcp_fd = -1;                                     // Rdma: the TCP socket, moved here
    int failed_errno = 0;                                // Failed: what SO_ERROR/send say
    bool told_failover = false;                          // Rdma: the move onto TCP was said (stderr)
    bool told_failure = false;                           // Rdma: the session's RDMA failure was said
};

class SocketTable {
public:
    static constexpr int kSlots = 1 << 16;  // descriptors above are never upgraded

    static SocketTable& instance() noexcept;

    // nullptr when `fd` has no entry (the common case, lock-free).
    SocketEntry* find(int fd) const noexcept {
        if (fd < 0 || fd >= kSlots || count_.load(std::memory_order_acquire) == 0) return nullptr;
        return slots_[fd].load(std::memory_order_acquire);
    }
    // True when any descriptor has an entry (the wrappers' first check).
    bool any() const noexcept { return count_.load(std::memory_order_acquire) != 0; }
    // False when `fd` is out of range or already has an entry.
    bool install(int fd, std::unique_ptr<SocketEntry> entry) noexcept;
    std::unique_ptr<SocketEntry> take(int fd) noexcept;

private:
    std::atomic<SocketEntry*> slots_[kSlots]{};
    std::atomic<int> count_{0};
};

}  // namespace pg_rdma::client
