// poll, ppoll, select and pselect as libpq_rdma.so exports them, for every
// caller in the process: libpq's own waits and an application's waits on
// PQsocket(). A call that names no descriptor of ours goes to libc as it is.
// Otherwise readiness.hpp answers for ours: ready ones are reported at once
// (the others polled with timeout 0); if none is, the real poll() watches
// substitutes (the transport's fd with the interest set, the upgrade's
// descriptor) beside the caller's other descriptors, and a wakeup that made
// nothing ready (a keepalive tick) waits again for the time that is left.
#include <poll.h>
#include <sys/select.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <vector>

#include "libclient/preload/inherited_session.hpp"
#include "libclient/preload/libc_calls.hpp"
#include "libclient/preload/readiness.hpp"
#include "libclient/preload/socket_table.hpp"

using namespace pg_rdma::client;

namespace {

using Clock = std::chrono::steady_clock;

bool names_ours(const pollfd* fds, nfds_t n) noexcept {
    if (in_transport() || !SocketTable::instance().any()) return false;
    // Every one is looked at: a forked child waiting to read or write a
    // session it inherited takes it over on the way (inherited_session.hpp),
    // so the wait sees what the number is now.
    bool any = false;
    for (nfds_t i = 0; i < n; ++i) {
        const bool to_move_bytes = (fds[i].events & (POLLIN | POLLOUT)) != 0;
        if ((to_move_bytes ? find_adopting(fds[i].fd) : SocketTable::instance().find(fds[i].fd)) != nullptr)
            any = true;
    }
    return any;
}

int remaining_ms(Clock::time_point deadline) noexcept {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left <= 0 ? 0 : static_cast<int>(left > INT_MAX ? INT_MAX : left);
}

int timespec_ms(const timespec* ts) noexcept {
    if (ts == nullptr) return -1;
    const long long ms = static_cast<long long>(ts->tv_sec) * 1000 + (ts->tv_nsec + 999'999) / 1'000'000;
    return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

// One descriptor of ours, alone, no signal mask: the Connection's wait()
// (it busy-polls briefly before sleeping).
bool wait_alone(pollfd& p, int timeout_ms, int& rc) noexcept {
    const EntryRef e = SocketTable::instance().find(p.fd);
    if (e == nullptr || e->state != SocketState::Rdma) return false;
    if (forked_away(*e)) {  // as poll() reports a descriptor it cannot use
        p.revents = POLLNVAL;
        rc = 1;
        return true;
    }
    TransportCall inside;
    const int ev = e->connection->wait(p.events, timeout_ms);
    if (ev < 0) {
        rc = -1;
        return true;
    }
    p.revents = static_cast<short>(ev & (p.events | POLLERR | POLLHUP | POLLNVAL | POLLRDHUP));
    rc = p.revents != 0 ? 1 : 0;
    return true;
}

int poll_ours(pollfd* fds, nfds_t n, int timeout_ms, const sigset_t* mask) noexcept {
    int rc = 0;
    if (n == 1 && mask == nullptr && wait_alone(fds[0], timeout_ms, rc)) return rc;
    std::vector<pollfd> sub;
    try {
        sub.resize(n);
    } catch (...) {
        errno = ENOMEM;
        return -1;
    }
    const Clock::time_point deadline =
        timeout_ms < 0 ? Clock::time_point::max() : Clock::now() + std::chrono::milliseconds(timeout_ms);
    auto& table = SocketTable::instance();
    for (;;) {
        int ready = 0;
        for (nfds_t i = 0; i < n; ++i) {
            fds[i].revents = 0;
            if (const EntryRef e = table.find(fds[i].fd)) {
                sub[i] = substitute(*e, fds[i].fd, fds[i].events);
                fds[i].revents = ready_now(*e, fds[i].events);
                if (fds[i].revents != 0) ++ready;
            } else {
                sub[i] = fds[i];
            }
            sub[i].revents = 0;
        }
        int wait = ready > 0 ? 0 : (timeout_ms < 0 ? -1 : remaining_ms(deadline));
        // An upgrade's deadline wakes the wait: its next step must run then.
        for (nfds_t i = 0; i < n && wait != 0; ++i)
            if (const EntryRef e = table.find(fds[i].fd))
                if (const int limit = upgrade_wait_limit(*e); limit >= 0 && (wait < 0 || limit < wait)) wait = limit;
        int real;
        if (mask == nullptr) {
            real = libc().poll(sub.data(), n, wait);
        } else {
            timespec ts{wait / 1000, (wait % 1000) * 1'000'000L};
            real = libc().ppoll(sub.data(), n, wait < 0 ? nullptr : &ts, mask);
        }
        if (real < 0) return -1;
        int count = 0;
        for (nfds_t i = 0; i < n; ++i) {
            if (const EntryRef e = table.find(fds[i].fd))
                fds[i].revents = static_cast<short>(fds[i].revents | translate(*e, fds[i].events, sub[i].revents));
            else
                fds[i].revents = sub[i].revents;
            if (fds[i].revents != 0) ++count;
        }
        if (count > 0 || (timeout_ms >= 0 && remaining_ms(deadline) == 0)) return count;
    }
}

// select()'s sets as pollfds (only when one of ours is in them).
int select_ours(int nfds, fd_set* r, fd_set* w, fd_set* x, int timeout_ms, const sigset_t* mask) noexcept {
    std::vector<pollfd> fds;
    try {
        for (int fd = 0; fd < nfds; ++fd) {
            short ev = 0;
            if (r != nullptr && FD_ISSET(fd, r)) ev |= POLLIN;
            if (w != nullptr && FD_ISSET(fd, w)) ev |= POLLOUT;
            if (x != nullptr && FD_ISSET(fd, x)) ev |= POLLPRI;
            if (ev != 0) fds.push_back({fd, ev, 0});
        }
    } catch (...) {
        errno = ENOMEM;
        return -1;
    }
    const int rc = poll_ours(fds.data(), fds.size(), timeout_ms, mask);
    if (rc < 0) return -1;
    if (r != nullptr) FD_ZERO(r);
    if (w != nullptr) FD_ZERO(w);
    if (x != nullptr) FD_ZERO(x);
    int count = 0;
    for (const pollfd& p : fds) {
        // select() reports errors and hang-ups as readable and writable.
        const short bad = p.revents & (POLLERR | POLLHUP | POLLNVAL);
        if (r != nullptr && (p.events & POLLIN) && (p.revents & (POLLIN | POLLRDHUP) || bad)) FD_SET(p.fd, r), ++count;
        if (w != nullptr && (p.events & POLLOUT) && (p.revents & POLLOUT || bad)) FD_SET(p.fd, w), ++count;
        if (x != nullptr && (p.events & POLLPRI) && (p.revents & POLLPRI)) FD_SET(p.fd, x), ++count;
    }
    return count;
}

bool sets_name_ours(int nfds, const fd_set* r, const fd_set* w, const fd_set* x) noexcept {
    if (in_transport() || !SocketTable::instance().any()) return false;
    const int top = nfds < FD_SETSIZE ? nfds : FD_SETSIZE;
    bool any = false;  // every one, as in names_ours()
    for (int fd = 0; fd < top; ++fd) {
        const bool to_move_bytes = (r != nullptr && FD_ISSET(fd, r)) || (w != nullptr && FD_ISSET(fd, w));
        if (to_move_bytes ? find_adopting(fd) != nullptr
                          : (x != nullptr && FD_ISSET(fd, x) && SocketTable::instance().find(fd) != nullptr))
            any = true;
    }
    return any;
}

int timeval_ms(const timeval* tv) noexcept {
    if (tv == nullptr) return -1;
    const long long ms = static_cast<long long>(tv->tv_sec) * 1000 + (tv->tv_usec + 999) / 1000;
    return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

}  // namespace

// glibc declares poll()'s array write-only; ours reads what the caller asked.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

extern "C" {

__attribute__((visibility("default"))) int poll(pollfd* fds, nfds_t n, int timeout) {
    if (!names_ours(fds, n)) return libc().poll(fds, n, timeout);
    return poll_ours(fds, n, timeout, nullptr);
}

__attribute__((visibility("default"))) int ppoll(pollfd* fds, nfds_t n, const timespec* ts, const sigset_t* mask) {
    if (!names_ours(fds, n)) return libc().ppoll(fds, n, ts, mask);
    return poll_ours(fds, n, timespec_ms(ts), mask);
}

__attribute__((visibility("default"))) int select(int nfds, fd_set* r, fd_set* w, fd_set* x, timeval* tv) {
    if (!sets_name_ours(nfds, r, w, x)) return libc().select(nfds, r, w, x, tv);
    // Linux select() leaves the time not slept in *tv; callers of ours get 0.
    const int rc = select_ours(nfds, r, w, x, timeval_ms(tv), nullptr);
    if (rc == 0 && tv != nullptr) *tv = timeval{0, 0};
    return rc;
}

__attribute__((visibility("default"))) int pselect(int nfds, fd_set* r, fd_set* w, fd_set* x, const timespec* ts,
                                                   const sigset_t* mask) {
    if (!sets_name_ours(nfds, r, w, x)) return libc().pselect(nfds, r, w, x, ts, mask);
    return select_ours(nfds, r, w, x, timespec_ms(ts), mask);
}

}  // extern "C"
