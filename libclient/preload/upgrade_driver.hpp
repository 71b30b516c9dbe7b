// The RDMA upgrade of one connection attempt, driven from libpq's own
// PQconnectPoll loop so that it happens after the TCP connect and before
// libpq's first byte, without blocking the caller:
//
//   libpq connect()s (wrapper: arm)            -> Connecting
//   TCP connected (PQconnectPoll: drive)       -> Upgrading, one step per call
//   upgrade done:
//     Rdma          -> the TCP socket moves to a new number, the transport's
//                      fd takes libpq's number (PQsocket() stays valid)
//     TcpSame       -> entry gone: plain libpq on the same connection
//     TcpReconnect  -> a new TCP socket under libpq's number, connecting
//                      to the same address -> Reconnecting -> entry gone
//     Failed        -> Failed: libpq's SO_ERROR check fails the attempt
//
// While drive() answers, libpq's PQconnectPoll is not called: the caller
// waits (poll_wrappers answer for the socket from the upgrade's want()) and
// calls again. When drive() answers nothing, libpq's PQconnectPoll runs.
#pragma once

#include <libpq-fe.h>
#include <sys/socket.h>

#include <optional>
#include <string>

#include "libclient/conninfo/policy.hpp"
#include "libclient/preload/socket_table.hpp"

namespace pg_rdma::client {

// Called by the connect() wrapper for a TCP socket of an attempt that asked
// for RDMA. False if the socket cannot be looked after (its number is too
// high, memory): then `reason` says why, for require to fail on.
bool arm(int fd, const sockaddr* addr, socklen_t len, conninfo::RsocketPolicy policy);

// The line for PQerrorMessage when libpq's own connect_timeout ends an
// attempt whose upgrade is still under way ("" when none is): which stage
// it was in, and what to check.
std::string abandoned_by_libpq(const SocketEntry& entry);

// See above. `failure` gets a line for PQerrorMessage when the attempt is
// made to fail (require); the wrapper appends it after libpq's own line.
std::optional<PostgresPollingStatusType> drive(PGconn* conn, int fd, SocketEntry& entry, std::string& failure);

}  // namespace pg_rdma::client
