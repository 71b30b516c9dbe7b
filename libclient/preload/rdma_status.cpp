// PQrdmaInUse, PQrdmaAttribute, PQrdmaAttributeNames: what a program can
// ask of a PGconn's transport, as it asks PQsslInUse and PQsslAttribute of
// its TLS (libpq-rdma.h declares them). The answers come from the socket
// table (is the number a session on RDMA now, on which device) and the
// PGconn's record (what it asked for, why its last attempt stayed on TCP).
#include <libpq-fe.h>
#include <sys/socket.h>

#include <array>
#include <cstring>
#include <optional>
#include <string>

#include "libclient/preload/conn_policy.hpp"
#include "libclient/preload/libpq_calls.hpp"
#include "libclient/preload/socket_table.hpp"

namespace pg_rdma::client {
namespace {

// The attribute names, in their answer slots' order (conn_policy.hpp).
constexpr std::array<const char*, kAnswerSlots + 1> kNames = {"transport", "requested", "device", "reason", nullptr};
static_assert(kNames.size() == kAnswerSlots + 1);

struct Status {
    bool known = false;  // a socket to describe
    bool rdma = false;
    std::string transport;
    std::string device;
    std::string failed_over;  // the session's reason for leaving RDMA, when it did
};

// What the PGconn's socket is now. `pq`: the caller's libpq.
Status status_of(const LibpqCalls& pq, const PGconn* conn) noexcept {
    Status s;
    try {
        const int fd = pq.PQsocket(conn);
        if (fd < 0) return s;
        s.known = true;
        if (const EntryRef e = SocketTable::instance().find(fd);
            e != nullptr && e->state == SocketState::Rdma && e->connection != nullptr) {
            // A forked child's copy the child has not taken over is still
            // its parent's session on RDMA; its first call takes it over.
            if (!e->connection->stats().failed_over) {
                s.rdma = true;
                s.transport = "rdma";
                s.device = e->connection->device_name();
                return s;
            }
            s.failed_over = e->connection->failure_reason();
            if (s.failed_over.empty()) s.failed_over = "the RDMA connection failed";
        }
        sockaddr_storage addr{};
        socklen_t len = sizeof addr;
        // Of the real socket: the session's number is the transport's only
        // while on RDMA, handled above.
        if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 && addr.ss_family == AF_UNIX)
            s.transport = "unix";
        else
            s.transport = "tcp";
    } catch (...) {
        s.known = false;
    }
    return s;
}

std::optional<std::string> answer(const LibpqCalls& pq, const PGconn* conn, std::size_t slot) {
    const Status s = status_of(pq, conn);
    if (!s.known) return std::nullopt;
    switch (slot) {
        case 0:
            return s.transport;
        case 1: {
            const std::optional<PolicyChoice> choice = choice_of(conn);
            if (!choice) return std::nullopt;  // started around our wrappers
            if (choice->servers_file_decides)
                if (std::optional<std::string> rule = rule_of(conn)) return rule;
            if (choice->policy == RsocketPolicy::Off) return std::string("false");
            return choice->value.value_or(std::string("true"));
        }
        case 2:
            if (!s.rdma || s.device.empty()) return std::nullopt;
            return s.device;
        case 3: {
            if (s.rdma) return std::nullopt;
            if (!s.failed_over.empty()) return "the session moved to TCP: " + s.failed_over;
            if (s.transport == "unix") return std::string("a Unix-domain socket: RDMA needs an IP address");
            const std::optional<PolicyChoice> choice = choice_of(conn);
            if (!choice) return std::nullopt;
            if (std::optional<std::string> why = fallback_of(conn)) return why;
            if (choice->policy == RsocketPolicy::Off && !choice->servers_file_decides)
                return std::string("not asked for: with_rsocket is false or not set");
            if (choice->policy == RsocketPolicy::Off)
                return std::string("not asked for: with_rsocket is not set and no servers file rule asks for RDMA");
            return std::string("RDMA was not used");
        }
        default:
            return std::nullopt;
    }
}

}  // namespace
}  // namespace pg_rdma::client

using namespace pg_rdma::client;

extern "C" {

namespace {

// The libpq that made `conn` (a process may hold several copies), else the
// caller's.
const LibpqCalls* libpq_of(const PGconn* conn, const void* caller) noexcept {
    try {
        if (const LibpqCalls* made = calls_of(conn)) return made;
    } catch (...) {
    }
    return libpq_for(caller);
}

}  // namespace

__attribute__((visibility("default"))) int PQrdmaInUse(const PGconn* conn) {
    if (conn == nullptr) return 0;
    const LibpqCalls* pq = libpq_of(conn, __builtin_return_address(0));
    if (pq == nullptr || pq->PQsocket == nullptr) return 0;
    return status_of(*pq, conn).rdma ? 1 : 0;
}

__attribute__((visibility("default"))) const char* PQrdmaAttribute(const PGconn* conn, const char* attribute_name) {
    if (conn == nullptr || attribute_name == nullptr) return nullptr;
    const LibpqCalls* pq = libpq_of(conn, __builtin_return_address(0));
    if (pq == nullptr || pq->PQsocket == nullptr) return nullptr;
    for (std::size_t slot = 0; slot < kAnswerSlots; ++slot) {
        if (std::strcmp(attribute_name, kNames[slot]) != 0) continue;
        try {
            const std::optional<std::string> a = answer(*pq, conn, slot);
            return a ? keep_answer(conn, slot, *a) : nullptr;
        } catch (...) {
            return nullptr;
        }
    }
    return nullptr;
}

__attribute__((visibility("default"))) const char* const* PQrdmaAttributeNames(const PGconn*) { return kNames.data(); }

}  // extern "C"
