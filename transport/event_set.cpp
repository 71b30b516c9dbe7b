#include "transport/event_set.hpp"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

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

bool add(int epfd, int fd) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
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
    for (int fd : {completion_fd, cm_fd, wake_.get(), timer_.get()})
        if (!add(epoll_.get(), fd)) return fail_errno(err, errno, "epoll_ctl(EPOLL_CTL_ADD)");
    return true;
}

bool EventSet::set_tick(std::chrono::milliseconds tick) {
    const itimerspec spec{to_timespec(tick), to_timespec(tick)};
    return timerfd_settime(timer_.get(), 0, &spec, nullptr) == 0;
}

void EventSet::set_ready(bool ready) {
    if (ready == ready_) return;
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

bool EventSet::wait(std::chrono::milliseconds timeout) const {
    pollfd p{epoll_.get(), POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(timeout.count())) > 0;
}

}  // namespace pg_rdma::transport
