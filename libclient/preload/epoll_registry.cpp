#include "libclient/preload/epoll_registry.hpp"

#include <algorithm>

namespace pg_rdma::client {

EpollRegistry& EpollRegistry::instance() noexcept {
    static auto* registry = new EpollRegistry;  // never destroyed: used at exit
    return *registry;
}

void EpollRegistry::put(const EpollRegistration& reg) {
    std::lock_guard lock(mutex_);
    for (EpollRegistration& r : regs_)
        if (r.epfd == reg.epfd && r.fd == reg.fd) {
            r = reg;
            return;
        }
    regs_.push_back(reg);
    count_.store(regs_.size(), std::memory_order_release);
}

void EpollRegistry::remove(int epfd, int fd) noexcept {
    std::lock_guard lock(mutex_);
    std::erase_if(regs_, [&](const EpollRegistration& r) { return r.epfd == epfd && r.fd == fd; });
    count_.store(regs_.size(), std::memory_order_release);
}

void EpollRegistry::forget_descriptor(int fd) noexcept {
    std::lock_guard lock(mutex_);
    std::erase_if(regs_, [&](const EpollRegistration& r) { return r.epfd == fd || r.fd == fd; });
    count_.store(regs_.size(), std::memory_order_release);
}

std::vector<EpollRegistration> EpollRegistry::of(int epfd) const {
    std::lock_guard lock(mutex_);
    std::vector<EpollRegistration> out;
    for (const EpollRegistration& r : regs_)
        if (r.epfd == epfd) out.push_back(r);
    return out;
}

std::vector<EpollRegistration> EpollRegistry::naming(int fd) const {
    std::lock_guard lock(mutex_);
    std::vector<EpollRegistration> out;
    for (const EpollRegistration& r : regs_)
        if (r.fd == fd) out.push_back(r);
    return out;
}

}  // namespace pg_rdma::client
