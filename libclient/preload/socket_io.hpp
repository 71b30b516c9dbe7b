// Data and socket-level calls on a descriptor this library looks after,
// shared by every wrapper that takes one (socket_wrappers.cpp for the
// plain calls, message_wrappers.cpp for the msghdr and address forms,
// fortified_wrappers.cpp for glibc's _FORTIFY_SOURCE entry points).
// POSIX contract throughout: -1 and errno. Never an exception.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "libclient/preload/socket_table.hpp"

namespace pg_rdma::client {

// The entry of `fd`, pinned, when this call is ours to handle; else empty.
EntryRef ours(int fd) noexcept;

// The same for a data call: a forked child moving bytes on a session it
// inherited takes it over first (inherited_session.hpp). Socket-level
// queries and shutdown do not: they say nothing of who will use it.
EntryRef ours_for_data(int fd) noexcept;

// Where a data call on `fd` goes, once the first-write path
// (first_write.hpp) has had its say: `answered` with the call's result
// (bytes kept while an upgrade goes on, EAGAIN, a failure), else to the
// entry's session, or to libc when `entry` is empty.
struct DataRoute {
    EntryRef entry;
    bool answered = false;
    ssize_t answer = 0;  // errno set when -1
};
// `flags`: the call's (MSG_DONTWAIT), 0 for read/write.
DataRoute route_read(int fd, int flags) noexcept;
DataRoute route_write(int fd, const iovec* iov, int iovcnt, int flags) noexcept;

// The descriptor socket-level calls on `fd` should reach.
int socket_of(const SocketEntry& entry, int fd) noexcept;

// Data calls while the upgrade still owns the socket: libpq sends nothing
// then (PQconnectPoll does not run it), but an application might. True
// when such a call goes to the TCP socket as it is.
bool passes_through(const SocketEntry& entry) noexcept;

// The Teardown (socket_table.hpp) of an entry whose program closed it: the
// session is closed (a forked child's copy of its parent's is only let go
// of), then the TCP socket kept beside it. Its numbers are the closer's.
int end_session(SocketEntry& entry) noexcept;

// close()'s work on `fd`, shared by the close() (socket_wrappers.cpp) and
// syscall(SYS_close) (descriptor_wrappers.cpp) wrappers: the number leaves
// the tables, its session ends with its last number, and the kernel closes
// it as the caller did, through glibc's close() or the bare system call
// (no cancellation point).
enum class KernelClose { Libc, SystemCall };
int close_number(int fd, KernelClose how) noexcept;

// Bytes in and out of the entry's session (one buffer, or a gather list).
// A session whose program's socket was blocking (entry.blocking) waits as
// that socket would, unless `flags` has MSG_DONTWAIT.
ssize_t conn_read(SocketEntry& entry, void* buf, size_t len, int flags = 0) noexcept;
ssize_t conn_write(SocketEntry& entry, const void* buf, size_t len, int flags = 0) noexcept;
ssize_t conn_writev(SocketEntry& entry, const iovec* iov, int iovcnt, int flags = 0) noexcept;

}  // namespace pg_rdma::client
