// The C library's own socket and wait calls, for this library's wrappers to
// forward to and for everything it does itself (the transport included).
//
// Found by naming libc.so.6 (server_ext/interpose/library_function.hpp), not
// by RTLD_NEXT, so another preloaded shim cannot stand in for libc. Filled
// by a constructor before main(); every entry is non-null afterwards, or the
// process has no usable libc and aborts at load with a message.
//
// TransportCall marks a stretch of code in which this thread is inside the
// transport or the upgrade: the data and wait wrappers then forward
// straight to libc, so the transport's own poll/epoll_wait/send/recv never
// meet them. The descriptor wrappers (close, dup...) do not ask, as a
// signal handler's calls are the program's: the transport's descriptors
// have no entry there, and its one copy of a program's socket is made by
// the system call (transport/stream_failover.cpp).
#pragma once

#include <poll.h>
#include <stdio.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

namespace pg_rdma::client {

struct LibcCalls {
    // Found first: this library's own error messages go through it.
    long (*syscall)(long, ...);
    int (*connect)(int, const sockaddr*, socklen_t);
    int (*close)(int);
    ssize_t (*recv)(int, void*, size_t, int);
    ssize_t (*send)(int, const void*, size_t, int);
    ssize_t (*read)(int, void*, size_t);
    ssize_t (*write)(int, const void*, size_t);
    ssize_t (*readv)(int, const iovec*, int);
    ssize_t (*writev)(int, const iovec*, int);
    ssize_t (*recvfrom)(int, void*, size_t, int, sockaddr*, socklen_t*);
    ssize_t (*sendto)(int, const void*, size_t, int, const sockaddr*, socklen_t);
    ssize_t (*recvmsg)(int, msghdr*, int);
    ssize_t (*sendmsg)(int, const msghdr*, int);
    int (*poll)(pollfd*, nfds_t, int);
    int (*ppoll)(pollfd*, nfds_t, const timespec*, const sigset_t*);
    int (*select)(int, fd_set*, fd_set*, fd_set*, timeval*);
    int (*pselect)(int, fd_set*, fd_set*, fd_set*, const timespec*, const sigset_t*);
    int (*getsockopt)(int, int, int, void*, socklen_t*);
    int (*setsockopt)(int, int, int, const void*, socklen_t);
    int (*getsockname)(int, sockaddr*, socklen_t*);
    int (*getpeername)(int, sockaddr*, socklen_t*);
    int (*shutdown)(int, int);
    int (*epoll_ctl)(int, int, int, epoll_event*);
    int (*epoll_wait)(int, epoll_event*, int, int);
    int (*epoll_pwait)(int, epoll_event*, int, int, const sigset_t*);
    // glibc 2.35 and later; nullptr with an older C library (the wrapper
    // then answers ENOSYS, as such a libc would).
    int (*epoll_pwait2)(int, epoll_event*, int, const timespec*, const sigset_t*);
    int (*dup)(int);
    int (*dup2)(int, int);
    int (*dup3)(int, int, int);
    int (*fcntl)(int, int, ...);
    int (*ioctl)(int, unsigned long, ...);
    int (*fcntl64)(int, int, ...);     // glibc 2.28 and later, else nullptr
    int (*close_range)(unsigned int, unsigned int, int);  // glibc 2.34 and later, else nullptr
    void (*closefrom)(int);                               // glibc 2.34 and later, else nullptr
    int (*fclose)(FILE*);
    FILE* (*fopen)(const char*, const char*);
    FILE* (*fopen64)(const char*, const char*);
};

const LibcCalls& libc() noexcept;

// libc's syscall(), for this library's own system calls: never our
// exported syscall() wrapper, and found alone (not with the whole table)
// when called early, so a call made while the table is being filled (an
// allocator's, inside dlopen) does not start filling it again. Answers
// ENOSYS in the one case it cannot be found: a call made while it is
// being looked up.
using SyscallFunction = long (*)(long, ...);
SyscallFunction libc_syscall() noexcept;

// Nesting depth of transport work on this thread (initial-exec TLS: safe to
// read from a signal handler, no allocation on first use).
bool in_transport() noexcept;

class TransportCall {
public:
    TransportCall() noexcept;
    ~TransportCall();
    TransportCall(const TransportCall&) = delete;
    TransportCall& operator=(const TransportCall&) = delete;
};

}  // namespace pg_rdma::client
