// The epoll sets that wait on the session's client socket, as the backend
// registered them (FeBeWaitSet in pq_init, before the first read; a
// WaitLatchOrSocket set during the TLS handshake). At the upgrade each is
// moved onto the RDMA connection's descriptor with the same epoll data, so
// the backend's WaitEventSet keeps working with the events it asked for.
// Pure bookkeeping, unit-tested on the host (tests/wait_registrations_test.cpp).
#pragma once

#include <sys/epoll.h>

#include <cstdint>
#include <vector>

namespace pg_rdma::server {

struct WaitRegistration {
    int epfd = -1;
    std::uint64_t data = 0;     // epoll_data as the caller gave it
    std::uint32_t events = 0;   // EPOLLIN / EPOLLOUT / EPOLLRDHUP ...
};

class WaitRegistrations {
public:
    // Applies an epoll_ctl on the client socket that succeeded.
    void apply(int epfd, int op, const epoll_event* event);
    // The set `epfd` was closed: its registration went with it.
    void forget_set(int epfd);
    [[nodiscard]] const WaitRegistration* find(int epfd) const;
    [[nodiscard]] const std::vector<WaitRegistration>& all() const { return regs_; }
    // What the connection's descriptor must signal: the union of every
    // registration's events, as poll(2) events.
    [[nodiscard]] short poll_interest() const;
    void clear() { regs_.clear(); }

private:
    std::vector<WaitRegistration> regs_;
};

// EPOLLIN/OUT/RDHUP/ERR/HUP <-> POLLIN/OUT/RDHUP/ERR/HUP; POLLNVAL becomes
// EPOLLERR|EPOLLHUP.
short poll_events_for(std::uint32_t epoll_events);
std::uint32_t epoll_events_for(short poll_events);

}  // namespace pg_rdma::server
