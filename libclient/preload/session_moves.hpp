// What both upgrade paths (upgrade_driver.hpp for libpq's attempts,
// first_write.hpp for a driver's connection) do to the number a program
// holds when an upgrade ends: put the session on RDMA under it, or a fresh
// TCP connection to the same server.
#pragma once

#include <memory>

#include "libclient/preload/socket_table.hpp"
#include "transport/connection.hpp"

namespace pg_rdma::client {

// Registrations of `fd` in the program's epoll sets that the registry
// does not know (made before connect(), as Netty's and Asio's loops do),
// read from /proc/self/fdinfo into it: the waits then answer for `fd` from
// the upgrade and the session, and rebind_epoll() moves them. May throw.
void adopt_epoll_registrations(int fd);

// Whether the TCP connect on `fd` has finished: 0 when connected, an errno
// when it failed, EINPROGRESS while it is still under way. Reading SO_ERROR
// clears it.
int tcp_connect_state(int fd) noexcept;

// The session moves to RDMA: the TCP socket to a number of its own (kept
// open, the session's identity for the server), the transport's fd onto
// `fd`, the program's epoll registrations with it (for a driver's
// connection, also those made before the library knew the number, read from
// /proc/self/fdinfo). 0, or an errno (the number is then still the TCP
// socket).
int take_over(int fd, SocketEntry& entry, std::unique_ptr<transport::Connection> connection);

// A fresh non-blocking TCP socket under `fd`'s number, with the socket
// options the old one had, connecting to `entry.peer`. 0, or the errno
// that stopped it.
int reconnect(int fd, const SocketEntry& entry);

}  // namespace pg_rdma::client
