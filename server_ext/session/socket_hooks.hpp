// The functions that replace recv, send, close, epoll_ctl and epoll_wait in
// the postgres executable (install.cpp points its GOT slots at them). Each
// passes every call to the real function unless it concerns this backend's
// client socket (compat::client_socket()) or an epoll set waiting on it, so the
// postmaster, auxiliary processes, files, latches and a backend's own libpq
// connections are untouched.
//
// The session is decided on its first read (socket_hooks.cpp): our upgrade
// request moves it onto RDMA (RdmaSession), anything else stays on TCP.
#pragma once

#include <sys/epoll.h>
#include <sys/types.h>

#include <cstddef>

namespace pg_rdma::server {

ssize_t hook_recv(int fd, void* buf, std::size_t len, int flags) noexcept;
ssize_t hook_send(int fd, const void* buf, std::size_t len, int flags) noexcept;
int hook_close(int fd) noexcept;
int hook_epoll_ctl(int epfd, int op, int fd, epoll_event* event) noexcept;
int hook_epoll_wait(int epfd, epoll_event* events, int maxevents, int timeout_ms) noexcept;

}  // namespace pg_rdma::server
