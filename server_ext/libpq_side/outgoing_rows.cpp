#include "server_ext/libpq_side/outgoing_rows.hpp"

#include <cstdlib>
#include <new>
#include <string>
#include <unordered_map>

#include "server_ext/libpq_side/client_library.hpp"
#include "server_ext/outgoing_slots.hpp"

#include "server_ext/pg_headers.hpp"

namespace pg_rdma::server {
namespace {

using StatusFn = ConnStatusType (*)(const PGconn*);
using TextFn = char* (*)(const PGconn*);
using InUseFn = int (*)(const PGconn*);
using AttributeFn = const char* (*)(const PGconn*, const char*);

constexpr const char* kNoLibrary =
    "pg_rdma.client_library is not loaded in this process (it is empty, or loading it failed: the server log "
    "says why)";

using RowMap = std::unordered_map<const PGconn*, int>;

// This process's connections with a row: PGconn -> slot. Server processes
// make their connections from one thread. Never destroyed: exit() runs
// static destructors before PostgreSQL's exit callbacks, whose PQfinish
// calls (the walreceiver's, a worker's) still look here.
RowMap& rows() {
    alignas(RowMap) static unsigned char storage[sizeof(RowMap)];
    static RowMap* const map = new (storage) RowMap;
    return *map;
}

const char* text_or_empty(const char* s) { return s != nullptr ? s : ""; }

// The role the process runs as, for who may see the row's details; none
// in a walreceiver or before authentication.
std::uint32_t process_role() { return MyProc != nullptr ? static_cast<std::uint32_t>(MyProc->roleId) : 0; }

void claim(PGconn* conn) {
    const auto status = reinterpret_cast<StatusFn>(libpq_function("PQstatus"));
    if (status == nullptr || status(conn) != CONNECTION_OK) return;
    // Already shown (a blocking connect's own PQconnectPoll, or a PQreset
    // that connected again): the row is made anew, with what is true now.
    if (const auto it = rows().find(conn); it != rows().end()) {
        release_outgoing_slot(it->second);
        rows().erase(it);
    }
    const auto hostaddr = reinterpret_cast<TextFn>(libpq_function("PQhostaddr"));
    const auto port = reinterpret_cast<TextFn>(libpq_function("PQport"));
    const auto in_use = reinterpret_cast<InUseFn>(client_function("PQrdmaInUse"));
    const auto attribute = reinterpret_cast<AttributeFn>(client_function("PQrdmaAttribute"));
    OutgoingIdentity id;
    const std::string address = hostaddr != nullptr ? text_or_empty(hostaddr(conn)) : "";
    const char* port_text = port != nullptr ? port(conn) : nullptr;
    id.remote_addr = address;
    id.remote_port = port_text != nullptr ? std::atoi(port_text) : 0;
    id.role = process_role();
    if (in_use != nullptr && attribute != nullptr) {
        const char* transport = attribute(conn, "transport");  // "rdma", "tcp" or "unix"
        id.transport = transport != nullptr ? transport : (in_use(conn) == 1 ? "rdma" : "tcp");
        id.device = text_or_empty(attribute(conn, "device"));
        id.requested = text_or_empty(attribute(conn, "requested"));
        id.reason = text_or_empty(attribute(conn, "reason"));
    } else {
        id.transport = address.empty() ? "unix" : "tcp";
        id.reason = kNoLibrary;
    }
    const int slot = claim_outgoing_slot(id);
    if (slot < 0) return;
    try {
        rows().emplace(conn, slot);
    } catch (...) {
        release_outgoing_slot(slot);  // no row rather than one nobody frees
        throw;
    }
}

}  // namespace

void note_connection_made(PGconn* conn) noexcept {
    if (conn == nullptr || !IsUnderPostmaster) return;
    // May raise a FATAL: no C++ object is alive yet in this frame.
    prepare_outgoing_slots();
    try {
        claim(conn);
    } catch (...) {
        // Out of memory for the map: the connection runs without a row.
    }
}

void note_connection_finished(PGconn* conn) noexcept {
    try {
        const auto it = rows().find(conn);
        if (it == rows().end()) return;
        release_outgoing_slot(it->second);
        rows().erase(it);
    } catch (...) {
    }
}

}  // namespace pg_rdma::server
