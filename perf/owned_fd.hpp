// One descriptor the benchmark owns, closed with the call that goes with
// its kind: close() for a socket, rclose() for an rsocket.
#pragma once

#include <utility>

namespace pg_rdma::perf {

template <int (*Close)(int)>
class OwnedFd {
public:
    explicit OwnedFd(int fd) : fd_(fd) {}
    ~OwnedFd()
    {
        if (fd_ >= 0)
            Close(fd_);
    }
    OwnedFd(const OwnedFd&) = delete;
    OwnedFd& operator=(const OwnedFd&) = delete;
    [[nodiscard]] int get() const { return fd_; }
    int release() { return std::exchange(fd_, -1); }

private:
    int fd_;
};

}  // namespace pg_rdma::perf
