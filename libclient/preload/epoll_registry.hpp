// The application's epoll registrations of upgraded descriptors. The number
// libpq holds is the transport's epoll fd after the upgrade, which only ever
// turns readable; so epoll_ctl registers it for EPOLLIN (telling the
// Connection what the caller asked for with set_interest) and remembers the
// caller's events and data here, and epoll_wait answers for it from the
// Connection (events_now before a sleep, poll_events after a wakeup it
// caused: epoll_wrappers.cpp). Registrations are reported
// level-triggered (EPOLLET/EPOLLONESHOT are not imitated).
//
// Registrations made while the socket was still TCP (during the connect)
// are remembered too: when the upgrade puts another file under the number
// (the transport's fd, or a reconnected TCP socket), rebind_epoll() takes
// them off the old file first and puts them on the new one, so the
// caller's epoll set follows the number it registered.
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "libclient/preload/libc_calls.hpp"

namespace pg_rdma::client {

struct EpollRegistration {
    int epfd;
    int fd;
    std::uint32_t events;  // what the caller asked for
    epoll_data_t data;     // what the caller wants back
};

class EpollRegistry {
public:
    static EpollRegistry& instance() noexcept;

    [[nodiscard]] bool empty() const noexcept { return count_.load(std::memory_order_acquire) == 0; }
    void put(const EpollRegistration& reg);  // adds or replaces (epfd, fd)
    void remove(int epfd, int fd) noexcept;
    // Every registration naming `fd` as either descriptor (it is closing).
    // Async-signal-safe (close() calls it, and PQcancel closes in signal
    // handlers): it never waits for the lock. When the lock is held,
    // perhaps by the very thread a handler interrupted, the descriptor is
    // queued and forgotten by the holder before it lets go; every other
    // call forgets the queue first, so a number reused after the close
    // never loses a registration made for its new file.
    void forget_descriptor(int fd) noexcept;
    // Every registration naming a descriptor in [first, last] (close_range,
    // closefrom). Never waits for the lock either.
    void forget_range(unsigned int first, unsigned int last) noexcept;
    [[nodiscard]] std::vector<EpollRegistration> of(int epfd) const;
    [[nodiscard]] std::vector<EpollRegistration> naming(int fd) const;

private:
    // Descriptors closed while the lock was held, each stored as fd + 1
    // (kFree: an empty slot, so that zero-initialised slots are free).
    static constexpr int kPendingSlots = 64;
    static constexpr int kFree = 0;

    class Locked;  // the lock, with the queue forgotten on taking and on letting go
    // const: the registrations are logically those not queued for
    // forgetting, so applying the queue (also from of() and naming())
    // changes nothing a caller can observe.
    void forget_locked(int fd) const noexcept;
    void forget_pending_locked() const noexcept;

    mutable std::mutex mutex_;
    mutable std::vector<EpollRegistration> regs_;
    mutable std::atomic<std::size_t> count_{0};
    mutable std::atomic<int> pending_[kPendingSlots]{};
    mutable std::atomic<int> pending_count_{0};
    // Set when a close could not be queued: every registration is checked.
    mutable std::atomic<bool> overflow_{false};
};

// Runs `swap` (which puts another file under `fd`) with every registration
// of `fd` moved across it: deleted from each epoll set before, added after
// (EPOLLIN only when `rdma`, else the caller's events). 0 or swap's errno.
template <typename Swap>
int rebind_epoll(int fd, bool rdma, Swap&& swap);

}  // namespace pg_rdma::client

template <typename Swap>
int pg_rdma::client::rebind_epoll(int fd, bool rdma, Swap&& swap) {
    const std::vector<EpollRegistration> regs =
        EpollRegistry::instance().empty() ? std::vector<EpollRegistration>{} : EpollRegistry::instance().naming(fd);
    for (const EpollRegistration& r : regs) (void)libc().epoll_ctl(r.epfd, EPOLL_CTL_DEL, fd, nullptr);
    const int rc = swap();
    for (const EpollRegistration& r : regs) {
        epoll_event ev{rdma ? static_cast<std::uint32_t>(EPOLLIN) : r.events, r.data};
        (void)libc().epoll_ctl(r.epfd, EPOLL_CTL_ADD, fd, &ev);
    }
    return rc;
}
