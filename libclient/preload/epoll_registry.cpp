#include "libclient/preload/epoll_registry.hpp"

#include <fcntl.h>

#include <algorithm>
#include <climits>

namespace pg_rdma::client {

class EpollRegistry::Locked {
public:
    explicit Locked(const EpollRegistry& registry) noexcept : registry_(registry) {
        registry_.mutex_.lock();
        registry_.forget_pending_locked();
    }
    ~Locked() {
        registry_.forget_pending_locked();
        registry_.mutex_.unlock();
    }
    Locked(const Locked&) = delete;
    Locked& operator=(const Locked&) = delete;

private:
    const EpollRegistry& registry_;
};

EpollRegistry& EpollRegistry::instance() noexcept {
    static auto* registry = new EpollRegistry;  // never destroyed: used at exit
    return *registry;
}

void EpollRegistry::put(const EpollRegistration& reg) {
    Locked lock(*this);
    for (EpollRegistration& r : regs_)
        if (r.epfd == reg.epfd && r.fd == reg.fd) {
            r = reg;
            return;
        }
    regs_.push_back(reg);
    count_.store(regs_.size(), std::memory_order_release);
}

void EpollRegistry::remove(int epfd, int fd) noexcept {
    Locked lock(*this);
    std::erase_if(regs_, [&](const EpollRegistration& r) { return r.epfd == epfd && r.fd == fd; });
    count_.store(regs_.size(), std::memory_order_release);
}

void EpollRegistry::forget_locked(int fd) const noexcept {
    std::erase_if(regs_, [&](const EpollRegistration& r) { return r.epfd == fd || r.fd == fd; });
    count_.store(regs_.size(), std::memory_order_release);
}

void EpollRegistry::forget_pending_locked() const noexcept {
    if (overflow_.exchange(false, std::memory_order_acq_rel)) {
        // Closes that found the queue full (or a range closed while the
        // lock was held): whatever names a descriptor no longer open goes.
        std::erase_if(regs_, [](const EpollRegistration& r) {
            return libc().fcntl(r.epfd, F_GETFD) < 0 || libc().fcntl(r.fd, F_GETFD) < 0;
        });
        count_.store(regs_.size(), std::memory_order_release);
    }
    if (pending_count_.load(std::memory_order_acquire) == 0) return;
    for (auto& slot : pending_) {
        const int held = slot.exchange(kFree, std::memory_order_acq_rel);
        if (held == kFree) continue;
        pending_count_.fetch_sub(1, std::memory_order_acq_rel);
        forget_locked(held - 1);
    }
}

void EpollRegistry::forget_descriptor(int fd) noexcept {
    if (fd < 0 || fd == INT_MAX) return;  // never registered (and fd + 1 must fit)
    if (mutex_.try_lock()) {
        forget_pending_locked();
        forget_locked(fd);
        forget_pending_locked();
        mutex_.unlock();
        return;
    }
    // Counted first: a holder letting go after the slot is filled sees it.
    pending_count_.fetch_add(1, std::memory_order_acq_rel);
    for (auto& slot : pending_) {
        int expected = kFree;
        if (slot.compare_exchange_strong(expected, fd + 1, std::memory_order_acq_rel)) return;
    }
    // Every slot taken: the holder checks every registration instead (the
    // holder may be the thread this handler interrupted, so never wait).
    pending_count_.fetch_sub(1, std::memory_order_acq_rel);
    overflow_.store(true, std::memory_order_release);
}

void EpollRegistry::forget_range(unsigned int first, unsigned int last) noexcept {
    if (!mutex_.try_lock()) {
        // Held (by another thread, or in a fork child by a thread that is
        // gone): the holder checks every registration on letting go.
        overflow_.store(true, std::memory_order_release);
        return;
    }
    forget_pending_locked();
    const auto in_range = [&](int fd) {
        return fd >= 0 && static_cast<unsigned int>(fd) >= first && static_cast<unsigned int>(fd) <= last;
    };
    std::erase_if(regs_, [&](const EpollRegistration& r) { return in_range(r.epfd) || in_range(r.fd); });
    count_.store(regs_.size(), std::memory_order_release);
    forget_pending_locked();
    mutex_.unlock();
}

std::vector<EpollRegistration> EpollRegistry::of(int epfd) const {
    Locked lock(*this);
    std::vector<EpollRegistration> out;
    for (const EpollRegistration& r : regs_)
        if (r.epfd == epfd) out.push_back(r);
    return out;
}

std::vector<EpollRegistration> EpollRegistry::naming(int fd) const {
    Locked lock(*this);
    std::vector<EpollRegistration> out;
    for (const EpollRegistration& r : regs_)
        if (r.fd == fd) out.push_back(r);
    return out;
}

}  // namespace pg_rdma::client
