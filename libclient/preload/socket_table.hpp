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
// driving that connection. A program may still close the number while
// another thread, or a signal handler on this one, is inside a call on it;
// so a lookup pins the entry (EntryRef), and an entry taken out of the
// table is destroyed by whoever lets go of it last: the remover at once
// when nobody else holds it, else the last call still inside. Its memory
// (a Shell) is never freed, only reused, so a lookup racing a removal
// touches nothing that is gone.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
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
    Plain,         // back on TCP as it is: out of the table, left to holders still inside
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
    // Upgraded at its first write (first_write.hpp), not by libpq's attempt:
    bool by_first_write = false;
    // Held while the upgrade is stepped or `pending` grows: a driver's
    // threads may share a socket, which libpq's never do.
    std::mutex first_write_lock;
    std::string pending;    // Upgrading: what the program wrote, sent once the upgrade ends
    bool blocking = false;  // Rdma: the program's socket was blocking; reads and writes wait
};

// What is done with an entry when it is destroyed, besides destroying it:
// an errno value or 0.
using Teardown = int (*)(SocketEntry& entry) noexcept;

// The reusable home of one entry (socket_table.cpp).
struct Shell;

// A pinned entry: it stays whole while this exists. Empty when the number
// has no entry. Move-only; one thread.
class EntryRef {
public:
    EntryRef() noexcept = default;
    EntryRef(EntryRef&& other) noexcept : shell_(other.shell_) { other.shell_ = nullptr; }
    EntryRef& operator=(EntryRef&& other) noexcept;
    EntryRef(const EntryRef&) = delete;
    EntryRef& operator=(const EntryRef&) = delete;
    ~EntryRef();

    SocketEntry* get() const noexcept;
    SocketEntry* operator->() const noexcept { return get(); }
    SocketEntry& operator*() const noexcept { return *get(); }
    explicit operator bool() const noexcept { return shell_ != nullptr; }
    friend bool operator==(const EntryRef& ref, std::nullptr_t) noexcept { return ref.shell_ == nullptr; }

private:
    friend class SocketTable;
    explicit EntryRef(Shell* shell) noexcept : shell_(shell) {}
    Shell* shell_ = nullptr;
};

class SocketTable {
public:
    static constexpr int kSlots = 1 << 16;  // descriptors above are never upgraded

    static SocketTable& instance() noexcept;

    // Empty when `fd` has no entry (the common case, lock-free) or its
    // entry is being removed.
    EntryRef find(int fd) const noexcept;
    // True when any descriptor has an entry (the wrappers' first check).
    bool any() const noexcept { return count_.load(std::memory_order_acquire) != 0; }
    // False in a child that shares its parent's memory (vfork: Python's
    // subprocess closes every descriptor there with close_range before
    // exec): the table and the sessions are the parent's, and the child's
    // closes must leave them alone. One system call: ask only when the
    // table or the epoll registry has something.
    static bool owned_here() noexcept;
    // False when `fd` is out of range or already has an entry.
    bool install(int fd, std::unique_ptr<SocketEntry> entry) noexcept;
    // `copy` (a dup of `fd`) is another number for `fd`'s entry, as a dup'ed
    // socket is another number for the same connection. False when `fd` has
    // no live entry, or `copy` is out of range or has one.
    bool alias(int fd, int copy) noexcept;

    struct Removal {
        bool found = false;   // `fd` had an entry
        bool now = false;     // it was destroyed in this call (else by the last holder)
        int error = 0;        // teardown's result, when now
    };
    // Takes the number `fd` out of the table. When it was the entry's last
    // number, the entry is destroyed, after `teardown` (if any) has run on
    // it, as soon as no call holds it any more. The number itself is the
    // caller's to close.
    Removal remove(int fd, Teardown teardown = nullptr) noexcept;

private:
    friend class EntryRef;
    static bool release(Shell* shell, int* error) noexcept;

    std::atomic<Shell*> slots_[kSlots]{};
    std::atomic<int> count_{0};
};

}  // namespace pg_rdma::client
