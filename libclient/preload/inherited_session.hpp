// A forked child's first call on an RDMA session its parent made
// (pg_basebackup -X stream streams WAL in a child over a connection the
// parent opened). The queue pair cannot follow the fork, so the child asks
// its parent for the session (transport/connection.hpp, "Fork"); when the
// parent has not used it since the fork, the child gets a socket its parent
// relays over RDMA, put under the number libpq holds. From then on that
// number is a plain socket, and this library lets it be.
#pragma once

#include "libclient/preload/socket_table.hpp"

namespace pg_rdma::client {

// The entry of `fd` as SocketTable::find() gives it, except that an
// inherited RDMA session is first taken over: empty then, the number now
// being a plain socket. An entry that stays is one the child could not take
// (forked_away() says why when it is used). Only for calls that move bytes
// (read, write, a wait for POLLIN or POLLOUT): a socket option, epoll_ctl
// or shutdown in a child says nothing of who will use the session, and
// must not take it from a parent that may still be waiting on it.
EntryRef find_adopting(int fd) noexcept;

// True (and one line on stderr, once per process) when `entry` is an RDMA
// session made before this process was forked that this process did not
// take over (find_adopting): every call here fails with EBADF. The line names the way out, since
// libpq's own message would only say "Bad file descriptor".
bool forked_away(const SocketEntry& entry) noexcept;

// Marks a PQfinish on this thread. A child that finishes a connection it
// inherited (pg_basebackup's child does so for the parent's main connection
// at exit) only lets go of its copy: it neither takes the session over to
// send libpq's Terminate on it nor prints forked_away()'s line.
class LettingGo {
public:
    LettingGo() noexcept;
    ~LettingGo();
    LettingGo(const LettingGo&) = delete;
    LettingGo& operator=(const LettingGo&) = delete;
};

}  // namespace pg_rdma::client
