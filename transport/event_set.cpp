#include "transport/event_set.hpp"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdint>
#include <utility>

namespace pg_rdma::transport {

FileDescriptor::~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
}

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = o.fd_;
        o.fd_ = -1;
    }
    return *this;
}

namespace {

bool add(int epfd, int fd, unsigned source) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = source;
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0;
}

timespec to_timespec(std::chrono::milliseconds ms) {
    const auto count = ms.count();
    return {static_cast<time_t>(count / 1000), static_cast<long>((count % 1000) * 1'000'000)};
}

}  // namespace

bool EventSet::init(int completion_fd, int cm_fd, std::chrono::milliseconds tick, Error& err) {
    epoll_ = FileDescriptor(epoll_create1(EPOLL_CLOEXEC));
    if (!epoll_.valid()) return fail_errno(err, errno, "epoll_create1");
    wake_ = FileDescriptor(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!wake_.valid()) return fail_errno(err, errno, "eventfd");
    timer_ = FileDescriptor(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
    if (!timer_.valid()) return fail_errno(err, errno, "timerfd_create");
    if (!set_tick(tick)) return fail_errno(err, errno, "timerfd_settime");
    const std::pair<int, unsigned> sources[] = {
        {completion_fd, kCompletion}, {cm_fd, kCm}, {wake_.get(), kReady}, {timer_.get(), kTick}};
    for (const auto& [fd, source] : sources)
        if (!add(epoll_.get(), fd, source)) return fail_errno(err, errno, "epoll_ctl(EPOLL_CTL_ADD)");
    return true;
}

bool EventSet::watch_tcp(int fd, std::uint32_t previous, std::uint32_t events) {
    if (previous == events) return true;
    if (events == 0) return epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr) == 0 || errno == EBADF;
    epoll_event ev{};
    ev.events = events;
    ev.data.u32 = kTcp;
    return epoll_ctl(epoll_.get(), previous == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &ev) == 0;
}

void EventSet::forget_rdma_sources(int completion_fd, int cm_fd) {
    // Failures mean the descriptor is not there any more: nothing to stop.
    (void)epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, completion_fd, nullptr);
    (void)epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, cm_fd, nullptr);
}

bool EventSet::set_tick(std::chrono::milliseconds tick) {
    const itimerspec spec{to_timespec(tick), to_timespec(tick)};
    return timerfd_settime(timer_.get(), 0, &spec, nullptr) == 0;
}

void EventSet::change_ready(bool ready) {
    std::uint64_t value = 1;
    // eventfd writes/reads of 8 bytes cannot fail short; a failure would only
    // mean the counter is already set (write) or already clear (read).
    if (ready)
        (void)!::write(wake_.get(), &value, sizeof value);
    else
        (void)!::read(wake_.get(), &value, sizeof value);
    ready_ = ready;
}

bool EventSet::take_tick() {
    std::uint64_t expirations = 0;
    return ::read(timer_.get(), &expirations, sizeof expirations) == sizeof expirations;
}

int EventSet::ready_sources(int timeout_ms, unsigned& sources) const {
    constexpr int kSources = 5;
    epoll_event evs[kSources];
    sources = 0;
    const int n = epoll_wait(epoll_.get(), evs, kSources, timeout_ms);
    for (int i = 0; i < n; ++i) sources |= evs[i].data.u32;
    return n;
}

unsigned EventSet::pending() const {
    unsigned bits = 0;
    if (ready_sources(0, bits) < 0) return kCompletion | kCm | kTick | kReady | kTcp | kUnsure;
    return bits;
}

int EventSet::wait(std::chrono::milliseconds timeout, unsigned& sources) const {
    const auto ms = timeout.count() < 0 ? -1 : static_cast<int>(std::min<std::int64_t>(timeout.count(), INT32_MAX));
    const int n = ready_sources(ms, sources);
    return n <= 0 ? n : 1;
}

}  // namespace pg_rdma::transport
