// epoll_ctl, epoll_wait and epoll_pwait as libpq_rdma.so exports them (see
// epoll_registry.hpp). Calls that involve no upgraded descriptor, and the
// transport's own, go to libc as they are.
#include <sys/epoll.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <vector>

#include "libclient/preload/driver_policy.hpp"
#include "libclient/preload/epoll_registry.hpp"
#include "libclient/preload/inherited_session.hpp"
#include "libclient/preload/libc_calls.hpp"
#include "libclient/preload/readiness.hpp"
#include "libclient/preload/socket_table.hpp"

using namespace pg_rdma::client;

namespace {

using Clock = std::chrono::steady_clock;

// How long one wait lasts while an upgrade's descriptor is not in the set.
constexpr int kUpgradeSliceMs = 5;
constexpr std::uint32_t kPollable = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI;

// poll(2) and epoll share the values of IN/OUT/ERR/HUP/RDHUP/PRI on Linux.
// `look_inside`: take in the events inside the connection's descriptor
// (poll_events), after a wakeup it caused; otherwise only what needs no
// system call (events_now), as before a sleep those events end at once.
std::uint32_t ready_events(SocketEntry& entry, std::uint32_t wanted, bool look_inside) noexcept {
    if (entry.state == SocketState::Failed) return EPOLLERR;
    if (entry.state == SocketState::Upgrading) {
        // Ready for the caller's next PQconnectPoll when the step can progress.
        TransportCall inside;
        pg_rdma::transport::Want want = entry.upgrade->want();
        if (!upgrade_due(entry) && (want.count == 0 || libc().poll(want.fds.data(), want.count, 0) <= 0)) return 0;
        return (wanted & (EPOLLIN | EPOLLOUT)) != 0 ? (wanted & (EPOLLIN | EPOLLOUT)) : EPOLLIN;
    }
    if (entry.state != SocketState::Rdma) return 0;
    // A session this forked child cannot use: said at once, not slept on.
    if (forked_away(entry)) return EPOLLERR | EPOLLHUP;
    TransportCall inside;
    const auto asked = static_cast<short>(wanted & kPollable);
    const short ev = look_inside ? entry.connection->poll_events(asked) : entry.connection->events_now(asked);
    const std::uint32_t got = static_cast<std::uint16_t>(ev);
    return got & ((wanted & kPollable) | EPOLLERR | EPOLLHUP);
}

bool same_data(const epoll_data_t& a, const epoll_data_t& b) noexcept { return a.u64 == b.u64; }

// events[0, ours) are our answers, events[ours, kept) the kernel's about
// the app's own descriptors. Those stay, first (an edge-triggered one would
// not be reported again); ours are asked again, looking inside, into what
// room is left (theirs are level-triggered: one left out comes next call).
int answer_ours_again(const std::vector<EpollRegistration>& regs, epoll_event* events, int ours, int kept,
                      int max) noexcept {
    const int theirs = kept - ours;
    std::memmove(events, events + ours, static_cast<std::size_t>(theirs) * sizeof(epoll_event));
    int n = theirs;
    for (const EpollRegistration& r : regs) {
        if (n == max) break;
        const EntryRef e = SocketTable::instance().find(r.fd);
        if (e == nullptr) continue;
        if (const std::uint32_t ev = ready_events(*e, r.events, true)) events[n++] = {ev, r.data};
    }
    return n;
}

int wait_ours(int epfd, epoll_event* events, int max, int timeout_ms, const sigset_t* mask) noexcept {
    std::vector<EpollRegistration> regs;
    try {
        regs = EpollRegistry::instance().of(epfd);
    } catch (...) {
        errno = ENOMEM;
        return -1;
    }
    auto& real_wait = libc().epoll_pwait;
    if (regs.empty() || max <= 0) return real_wait(epfd, events, max, timeout_ms, mask);
    const Clock::time_point deadline =
        timeout_ms < 0 ? Clock::time_point::max() : Clock::now() + std::chrono::milliseconds(timeout_ms);
    bool woke_for_ours = false;  // the last real wait reported one of our descriptors
    for (;;) {
        int n = 0;
        bool upgrading = false;  // its descriptors are not in the set: wait in slices
        for (const EpollRegistration& r : regs) {
            if (n == max) break;
            const EntryRef e = SocketTable::instance().find(r.fd);
            if (e == nullptr) continue;
            if (e->state == SocketState::Upgrading) upgrading = true;
            if (e->state == SocketState::Rdma) {
                TransportCall inside;
                e->connection->set_interest(static_cast<short>(r.events & kPollable));
            }
            // A call that cannot sleep asks every source at once.
            if (const std::uint32_t ev = ready_events(*e, r.events, woke_for_ours || timeout_ms == 0))
                events[n++] = {ev, r.data};
        }
        int wait = n > 0 ? 0 : -1;
        if (n == 0 && timeout_ms >= 0) {
            const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
            wait = left <= 0 ? 0 : static_cast<int>(left > INT_MAX ? INT_MAX : left);
        }
        if (upgrading && (wait < 0 || wait > kUpgradeSliceMs)) wait = kUpgradeSliceMs;
        int got = 0;
        if (n < max) {
            got = real_wait(epfd, events + n, max - n, wait, mask);
            if (got < 0) return n > 0 ? n : -1;
        }
        // Drop what the kernel said about our descriptors (their epoll fd's
        // internal wakeups): they were answered above, from the Connection.
        int kept = n;
        woke_for_ours = false;
        for (int i = n; i < n + got; ++i) {
            bool ours = false;
            for (const EpollRegistration& r : regs) {
                const EntryRef e = SocketTable::instance().find(r.fd);
                if (e != nullptr && same_data(events[i].data, r.data) &&
                    (e->state == SocketState::Rdma || e->state == SocketState::Upgrading || e->state == SocketState::Failed))
                    ours = true;
            }
            if (ours) woke_for_ours = true;
            else events[kept++] = events[i];
        }
        // Returning now, with a wakeup that named one of ours: it may carry
        // a keepalive tick or a disconnect, which events_now() above did
        // not take. Answer ours again from every source, or an app whose
        // other descriptors are ready on every call would never see them.
        if (woke_for_ours && kept > 0) kept = answer_ours_again(regs, events, n, kept, max);
        if (kept > 0 || (timeout_ms >= 0 && Clock::now() >= deadline) || (timeout_ms == 0)) return kept;
    }
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int epoll_ctl(int epfd, int op, int fd, epoll_event* event) {
    const EntryRef e = in_transport() ? EntryRef() : SocketTable::instance().find(fd);
    if (e == nullptr && !in_transport() && is_candidate(fd)) {
        // A driver's connection that may be upgraded at its first write:
        // remembered, so that its registrations follow the number then.
        if (libc().epoll_ctl(epfd, op, fd, event) < 0) return -1;
        try {
            if (op == EPOLL_CTL_DEL) EpollRegistry::instance().remove(epfd, fd);
            else if (event != nullptr) EpollRegistry::instance().put({epfd, fd, event->events, event->data});
        } catch (...) {
            // Not remembered: an upgrade would leave this registration on the TCP socket.
        }
        return 0;
    }
    if (e == nullptr) return libc().epoll_ctl(epfd, op, fd, event);
    try {
        if (e->state != SocketState::Rdma) {  // still TCP: remembered for rebind_epoll()
            if (libc().epoll_ctl(epfd, op, fd, event) < 0) return -1;
            if (op == EPOLL_CTL_DEL) EpollRegistry::instance().remove(epfd, fd);
            else if (event != nullptr) EpollRegistry::instance().put({epfd, fd, event->events, event->data});
            return 0;
        }
        if (op == EPOLL_CTL_DEL) {
            EpollRegistry::instance().remove(epfd, fd);
            return libc().epoll_ctl(epfd, op, fd, event);
        }
        if (event == nullptr) {
            errno = EFAULT;
            return -1;
        }
        epoll_event internal{EPOLLIN, event->data};
        if (libc().epoll_ctl(epfd, op, fd, &internal) < 0) return -1;
        EpollRegistry::instance().put({epfd, fd, event->events, event->data});
        TransportCall inside;
        e->connection->set_interest(static_cast<short>(event->events & kPollable));
        return 0;
    } catch (...) {
        errno = ENOMEM;
        return -1;
    }
}

__attribute__((visibility("default"))) int epoll_wait(int epfd, epoll_event* events, int max, int timeout) {
    if (in_transport() || EpollRegistry::instance().empty()) return libc().epoll_wait(epfd, events, max, timeout);
    return wait_ours(epfd, events, max, timeout, nullptr);
}

__attribute__((visibility("default"))) int epoll_pwait(int epfd, epoll_event* events, int max, int timeout,
                                                       const sigset_t* mask) {
    if (in_transport() || EpollRegistry::instance().empty())
        return libc().epoll_pwait(epfd, events, max, timeout, mask);
    return wait_ours(epfd, events, max, timeout, mask);
}

// epoll_pwait with a timespec: the same wait, its timeout rounded up to
// whole milliseconds when one of ours is in the set.
__attribute__((visibility("default"))) int epoll_pwait2(int epfd, epoll_event* events, int max,
                                                        const timespec* timeout, const sigset_t* mask) {
    if (in_transport() || EpollRegistry::instance().empty()) {
        if (libc().epoll_pwait2 == nullptr) {
            errno = ENOSYS;
            return -1;
        }
        return libc().epoll_pwait2(epfd, events, max, timeout, mask);
    }
    if (timeout != nullptr && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 || timeout->tv_nsec >= 1'000'000'000L)) {
        errno = EINVAL;
        return -1;
    }
    int timeout_ms = -1;
    if (timeout != nullptr) {
        const long long ms = static_cast<long long>(timeout->tv_sec) * 1000 + (timeout->tv_nsec + 999'999) / 1'000'000;
        timeout_ms = ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
    }
    return wait_ours(epfd, events, max, timeout_ms, mask);
}

}  // extern "C"
