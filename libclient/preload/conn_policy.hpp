// Which PGconn asked for RDMA, and how the socket libpq makes for it learns.
//
// The PQconnect* wrappers take with_rsocket out of what libpq sees and
// remember the policy here, keyed by the PGconn (PQfinish forgets it). libpq
// makes each attempt's socket inside PQconnectPoll, which the library wraps
// too: while the real PQconnectPoll runs, the thread's ActivePolicy says
// which policy a connect() on this thread belongs to. A connect() outside
// it (PQcancel, the application's own sockets) is never touched.
//
// libpq's PQconnectStart* call PQconnectPoll before they return the PGconn,
// and PQconnectdb* / PQsetdbLogin call PQconnectStart* themselves: a
// StartScope carries the policy of the outermost wrapper to the first
// PQconnectPoll of the PGconn being made.
#pragma once

#include <libpq-fe.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "libclient/conninfo/policy.hpp"

namespace pg_rdma::client {

using conninfo::RsocketPolicy;

// What a wrapper decided for the PGconn it starts: the policy, and the
// with_rsocket value as written where it won (connection, service section
// or WITH_RSOCKET), which PQconninfo reports.
struct PolicyChoice {
    RsocketPolicy policy = RsocketPolicy::Off;
    std::optional<std::string> value;
    // Nothing more specific than WITH_RSOCKET decided (no connection value,
    // no service line): the servers file's rule for the address each
    // attempt connects to comes first (driver_policy.hpp).
    bool servers_file_decides = false;
};

// The choice registered for `conn`, registering the StartScope's for a
// PGconn not seen yet; nullopt for one no wrapper of ours started (a
// program that reached libpq's PQconnectStart around them, as psycopg 3
// does through ctypes): its sockets are judged at their first write
// (first_write.hpp), as a driver's are.
std::optional<PolicyChoice> choice_of(const PGconn* conn);
// The value as written for a PGconn that asked for RDMA (true or require,
// from wherever it came); nullopt for every other PGconn.
std::optional<std::string> value_of(const PGconn* conn);
void forget(const PGconn* conn) noexcept;

// Why the PGconn's last attempt stayed on (or went back to) TCP under
// with_rsocket=true, as its warning said; nullopt when nothing was noted.
void note_fallback(const PGconn* conn, std::string_view reason) noexcept;
std::optional<std::string> fallback_of(const PGconn* conn);
// What a servers file rule asked for on the PGconn's last attempt ("true"
// or "require") when the rule decided (PolicyChoice::servers_file_decides).
void note_rule(const PGconn* conn, std::string_view value) noexcept;
std::optional<std::string> rule_of(const PGconn* conn);
// The libpq copy whose wrapper registered the PGconn; nullptr for one no
// wrapper of ours started.
struct LibpqCalls;
const LibpqCalls* calls_of(const PGconn* conn);
// Keeps `answer` with the PGconn's record in slot `slot` (< kAnswerSlots)
// and returns its characters, which stay valid until PQfinish (every
// distinct answer is kept): what PQrdmaAttribute hands out. nullptr for a
// PGconn no wrapper of ours started.
constexpr std::size_t kAnswerSlots = 4;
const char* keep_answer(const PGconn* conn, std::size_t slot, std::string_view answer) noexcept;

// Set by the outermost PQconnect* / PQsetdbLogin wrapper for the duration
// of the real call. Inner wrappers (PQconnectdb calls PQconnectStart) keep
// the outer one's policy.
class StartScope {
public:
    // `choice` outlives the scope.
    explicit StartScope(const PolicyChoice& choice) noexcept;
    ~StartScope();
    StartScope(const StartScope&) = delete;
    StartScope& operator=(const StartScope&) = delete;
    [[nodiscard]] static bool active() noexcept;
};

// Set by the PQconnectPoll wrapper around the real call.
class ActivePolicy {
public:
    explicit ActivePolicy(RsocketPolicy policy, bool servers_file_decides = false) noexcept;
    ~ActivePolicy();
    ActivePolicy(const ActivePolicy&) = delete;
    ActivePolicy& operator=(const ActivePolicy&) = delete;
    // The policy of the attempt this thread is in; Off outside (signal-safe).
    [[nodiscard]] static RsocketPolicy current() noexcept;
    // Whether this thread is inside libpq's PQconnectPoll, as our wrapper
    // runs it (whatever the policy): its connect()s are libpq's attempts,
    // never left to the first-write path (first_write.hpp).
    [[nodiscard]] static bool inside() noexcept;
    // Whether the servers file's rule for the address comes before
    // current() (PolicyChoice::servers_file_decides).
    [[nodiscard]] static bool servers_file_decides() noexcept;
    // A connect() under Require that could not use RDMA at all (a
    // Unix-domain socket) says so here; the PQconnectPoll wrapper adds it to
    // the connection's error message. Cleared by each new ActivePolicy.
    static void refuse(const char* why) noexcept;
    [[nodiscard]] static const char* refusal() noexcept;
};

}  // namespace pg_rdma::client
