#include "server_ext/session/wait_registrations.hpp"

#include <poll.h>

#include <algorithm>

namespace pg_rdma::server {

void WaitRegistrations::apply(int epfd, int op, const epoll_event* event) {
    auto it = std::find_if(regs_.begin(), regs_.end(), [&](const WaitRegistration& r) { return r.epfd == epfd; });
    if (op == EPOLL_CTL_DEL) {
        if (it != regs_.end()) regs_.erase(it);
        return;
    }
    if (event == nullptr) return;
    const WaitRegistration reg{epfd, event->data.u64, event->events};
    if (it != regs_.end())
        *it = reg;
    else if (op == EPOLL_CTL_ADD)
        regs_.push_back(reg);
}

void WaitRegistrations::forget_set(int epfd) {
    std::erase_if(regs_, [&](const WaitRegistration& r) { return r.epfd == epfd; });
}

const WaitRegistration* WaitRegistrations::find(int epfd) const {
    for (const auto& r : regs_)
        if (r.epfd == epfd) return &r;
    return nullptr;
}

short WaitRegistrations::poll_interest() const {
    short interest = 0;
    for (const auto& r : regs_) interest = static_cast<short>(interest | poll_events_for(r.events));
    return interest;
}

short poll_events_for(std::uint32_t e) {
    short p = 0;
    if ((e & EPOLLIN) != 0) p |= POLLIN;
    if ((e & EPOLLOUT) != 0) p |= POLLOUT;
    if ((e & EPOLLRDHUP) != 0) p |= POLLRDHUP;
    if ((e & EPOLLERR) != 0) p |= POLLERR;
    if ((e & EPOLLHUP) != 0) p |= POLLHUP;
    return p;
}

std::uint32_t epoll_events_for(short p) {
    std::uint32_t e = 0;
    if ((p & POLLIN) != 0) e |= EPOLLIN;
    if ((p & POLLOUT) != 0) e |= EPOLLOUT;
    if ((p & POLLRDHUP) != 0) e |= EPOLLRDHUP;
    if ((p & POLLERR) != 0) e |= EPOLLERR;
    if ((p & POLLHUP) != 0) e |= EPOLLHUP;
    // A connection that is no more: an event with no bits would be counted
    // by nobody (WaitEventSet drops it) and wake the caller again at once.
    if ((p & POLLNVAL) != 0) e |= EPOLLERR | EPOLLHUP;
    return e;
}

}  // namespace pg_rdma::server
