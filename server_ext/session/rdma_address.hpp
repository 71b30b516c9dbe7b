// Whether a session's local address (where the postmaster accepted it) is
// one of pg_rdma.listen_addresses: only there is the upgrade offered and the
// session shown in pg_stat_rdma.
#pragma once

#include <sys/socket.h>

#include <string>
#include <vector>

namespace pg_rdma::server {

// `items` as parse_address_list gives them: "*" matches every IP address;
// a name or address matches when one of its resolved addresses equals
// `local`'s IP (ports are not compared). Unix-domain sockets never match.
bool offers_rdma(const sockaddr* local, const std::vector<std::string>& items) noexcept;

}  // namespace pg_rdma::server
