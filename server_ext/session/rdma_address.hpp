// Whether a session's local address (where the postmaster accepted it) is
// one of pg_rdma.listen_addresses: only there is the upgrade offered and the
// session shown in pg_stat_rdma.
#pragma once

#include <sys/socket.h>


namespace pg_rdma::server {

// Resolves pg_rdma.listen_addresses (`list`, already checked by
// listen_setup) once, in the postmaster (install.cpp), as PostgreSQL
// resolves listen_addresses at startup; backends inherit the result, so no
// session start waits for a resolver. "*" means every IP address. Names
// that do not resolve are skipped (the postmaster's own listen_addresses
// handling reports them).
void remember_rdma_addresses(const char* list) noexcept;

// `local`'s IP equals one of the remembered addresses (ports are not
// compared). Unix-domain sockets never match.
bool offers_rdma(const sockaddr* local) noexcept;

}  // namespace pg_rdma::server
