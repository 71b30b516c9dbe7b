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
    void forget_descriptor(int fd) noexcept;
    [[nodiscard]] std::vector<EpollRegistration> of(int epfd) const;
    [[nodiscard]] std::vector<EpollRegistration> naming(int fd) const;

private:
    mutable std::mutex mutex_;
    std::vector<EpollRegistration> regs_;
    std::atomic<std::size_t> count_{0};
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
