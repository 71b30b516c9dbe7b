// The real functions behind the calls pg_rdma takes over in the postgres
// executable (install.cpp fills this from the GOT patch), for the session
// code to call for everything that is not the upgraded client socket.
#pragma once

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <poll.h>

#include <cstddef>

namespace pg_rdma::server {

struct RealCalls {
    ssize_t (*recv)(int, void*, std::size_t, int) = ::recv;
    ssize_t (*send)(int, const void*, std::size_t, int) = ::send;
    int (*close)(int) = nullptr;
    int (*epoll_ctl)(int, int, int, epoll_event*) = ::epoll_ctl;
    int (*epoll_wait)(int, epoll_event*, int, int) = ::epoll_wait;
};

// Until the patch is installed these are the functions this library was
// linked against, i.e. libc's: the extension never exports these names.
RealCalls& real_calls() noexcept;

}  // namespace pg_rdma::server
