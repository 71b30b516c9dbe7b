// Before anything is pinned for a client that has not said who it is:
// could any line of pg_hba.conf admit a TCP connection from its address,
// for some database and role? When none could, PostgreSQL will reject the
// client whatever it sends next, so the upgrade is declined at once (it
// stays on TCP, where PostgreSQL says no) and costs the server no queue
// pair and no pinned memory.
//
// Only what the address alone decides counts: a line naming a host name,
// samehost or samenet, a hostssl/hostgssenc line (the client may yet ask
// for TLS or GSS), or one for some databases or roles could admit; a
// reject line stops the lines after it only when it matches every
// connection from the address ("host all all ADDRESS reject", and for
// replication connections "host replication all ADDRESS reject").
//
// PostgreSQL decides on the rules it last loaded, which the file on disk
// may no longer be. So the file is judged only when it is what was loaded:
// not modified since the last reload, every line valid (PostgreSQL keeps
// its previous rules otherwise), at least one entry, and no text from
// another file (@file, include), whose times are not looked at. A radius
// line also leaves the decision to PostgreSQL: its parser resolves the
// RADIUS servers' names, which no stranger's request should make this
// server do. Any doubt, and any error, answers "could admit".
#pragma once

#include <sys/socket.h>

namespace pg_rdma::server {

struct HbaPrecheck {
    bool could_admit = true;
    // When not: the reject line that stopped the last kind of connection
    // still open (ordinary or replication), or 0 when none did (no line
    // that could admit matches the address).
    int line = 0;
};

// In a backend, before its RDMA setup. Never raises a PostgreSQL error.
HbaPrecheck precheck_hba(const sockaddr_storage& client) noexcept;

}  // namespace pg_rdma::server
