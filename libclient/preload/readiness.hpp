// poll()'s answer for the descriptors this library looks after, for the
// wait wrappers (poll_wrappers.cpp):
//   Rdma       the Connection's events_now() (poll_events() after a
//              wakeup the Connection caused): POLLIN/POLLOUT/POLLRDHUP/
//              POLLHUP/POLLERR exactly when libpq can progress; RDMA has
//              no POLLOUT of its own, the transport computes it
//   Upgrading  ready (with what the caller asked for) when the upgrade's
//              next step can progress, or its deadline has passed: libpq's
//              PQconnectPoll then steps it (and a step past the deadline
//              falls back or fails)
//   Failed     POLLERR (the caller's next PQconnectPoll fails the attempt)
//   Connecting, Reconnecting: the TCP socket itself
// and what to hand to the real poll() instead while nothing is ready.
#pragma once

#include <poll.h>

#include "libclient/preload/socket_table.hpp"

namespace pg_rdma::client {

// Events ready now on an entry's descriptor, given what the caller asked for
// (0 when nothing is, or when only the real poll can tell). Call it after
// substitute(): for a connection it asks no system call (events_now), and
// what it cannot tell without one (an event, a tick) keeps substitute()'s
// descriptor readable, so the real poll returns at once and translate()
// takes it in.
short ready_now(SocketEntry& entry, short wanted) noexcept;

// The pollfd the real poll() should watch for `entry` ({fd, events} as
// given when the TCP socket itself tells). Sets the Connection's interest.
pollfd substitute(SocketEntry& entry, int fd, short wanted) noexcept;

// How long a wait may last before `entry`'s upgrade must be stepped for its
// deadline: milliseconds, or -1 when nothing bounds it.
int upgrade_wait_limit(const SocketEntry& entry) noexcept;

// True when `entry` is an upgrade whose deadline has passed: its next step
// ends it, so a wait reports it ready at once.
bool upgrade_due(const SocketEntry& entry) noexcept;

// Turns what the real poll() said about substitute()'s pollfd into the
// caller's answer for `fd`.
short translate(SocketEntry& entry, short wanted, short real_revents) noexcept;

}  // namespace pg_rdma::client
