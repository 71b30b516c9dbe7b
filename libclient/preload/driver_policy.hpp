// Which of a program's own TCP connections (those made outside libpq's
// PQconnectPoll, as the wrappers see it: a driver that speaks the protocol
// itself, libpq reached around our wrappers) may be upgraded, and the
// marks that connect() leaves for the first write to find
// (first_write.hpp).
//
// The policy of such a connection, strongest first: the servers file's most
// specific rule for the address it connected to (conninfo/server_rules.hpp;
// the file named by PGRDMA_SERVERS_FILE, else /etc/pg_rdma/servers.conf),
// then WITH_RSOCKET, then off. Both are read once, when the library is
// loaded: connect() may be called in a signal handler, where neither a
// file nor the environment may be read.
//
// A mark is one bit per descriptor number, set by connect() without a
// system call or an allocation (async-signal-safe), and taken by the first
// call that moves bytes on the number; close(), dup2() onto it and the
// like drop it.
#pragma once

#include <sys/socket.h>

#include <optional>

#include "libclient/conninfo/policy.hpp"

namespace pg_rdma::client {

inline constexpr const char* kServersFileVariable = "PGRDMA_SERVERS_FILE";
inline constexpr const char* kDefaultServersFile = "/etc/pg_rdma/servers.conf";

// False when neither the servers file nor WITH_RSOCKET can ask for RDMA:
// connect() then marks nothing.
bool driver_path_enabled() noexcept;

// The policy for a connection to `peer`, per the order above.
conninfo::RsocketPolicy driver_policy_for(const sockaddr* peer, socklen_t len) noexcept;

// The servers file alone, for libpq's attempts whose conninfo and service
// section say nothing (it comes before WITH_RSOCKET there too): the most
// specific rule's policy for `peer`, nullopt when none names it.
std::optional<conninfo::RsocketPolicy> servers_file_policy(const sockaddr* peer, socklen_t len) noexcept;
bool servers_file_has_rules() noexcept;

void mark_candidate(int fd) noexcept;
// Whether `fd` is marked (one atomic load).
bool is_candidate(int fd) noexcept;
// Takes the mark: true when it was set (only one caller gets true).
bool take_candidate(int fd) noexcept;
void drop_candidates(unsigned first, unsigned last) noexcept;
// Whether any number is marked at all (the wrappers' first check).
bool any_candidates() noexcept;

}  // namespace pg_rdma::client
