// The upgrade of a connection libpq's wrappers never saw (a driver that
// speaks the protocol itself: pgJDBC, node-postgres, asyncpg, psycopg 3
// reaching libpq through ctypes...), decided at its first write.
//
//   connect() outside a libpq attempt, TCP, driver_policy enabled -> marked
//   first read on the number (the server speaks first)            -> unmarked
//   first write: a StartupMessage, SSLRequest or GSSENCRequest, or
//   a TLS ClientHello offering ALPN "postgresql" (direct SSL), to
//   a server whose policy is true or require                      -> upgrade
//   anything else (a CancelRequest, HTTP, ...)                     -> unmarked
//
// The upgrade runs before those bytes leave: they are kept (with whatever
// the program writes after them) and sent once it ends, over RDMA or over
// TCP; the program is told they were written. Its outcomes are libpq's
// (upgrade_driver.hpp): Rdma; TcpSame; TcpReconnect (a server without
// pg_rdma closed the connection: a fresh TCP connection under the same
// number, made and connected here, then the bytes); Failed (require: every
// call on the number fails with ECONNREFUSED, and one line on stderr says
// why). A fallback says why on stderr too, as libpq programs are told.
//
// Who drives it: a program on a blocking socket waits in that first write
// until the upgrade has ended (bounded by the transport's connect_timeout,
// 10 s, and the server's budget). A non-blocking one (an event loop) is
// told its bytes were written at once; the upgrade then advances in its
// calls: its wait (poll/select/epoll report the number ready when the
// upgrade's next step can run, or its deadline has passed) and the read or
// write that follows, which says EAGAIN while the upgrade goes on.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <optional>

#include "libclient/preload/socket_table.hpp"

namespace pg_rdma::client {

// For every call that writes on `fd`: when `fd` is marked and these bytes
// start a PostgreSQL session its policy says to upgrade, the upgrade starts
// and the call's answer is returned; nullopt: the call goes to libc as it
// is. Takes the mark in any case.
std::optional<ssize_t> first_write(int fd, const iovec* iov, int iovcnt, int flags) noexcept;

// For every call that reads on `fd` before it ever wrote: the mark goes.
void first_read(int fd) noexcept;

// How a data call on an entry whose upgrade started at its first write, and
// has not ended, goes on (advance_first_write).
enum class FirstWriteState { Upgrading, Session, Plain, Failed };

// Steps the upgrade; with `blocking`, to its end. Session: the number is on
// RDMA now; Plain: the entry is gone, the number is TCP; Failed: the
// entry's failed_errno says why.
FirstWriteState advance_first_write(int fd, SocketEntry& entry, bool blocking) noexcept;

// Bytes a program writes while its upgrade goes on are kept with the first
// ones, up to this much; then EAGAIN.
inline constexpr std::size_t kMaxPendingBytes = 256 * 1024;

}  // namespace pg_rdma::client
