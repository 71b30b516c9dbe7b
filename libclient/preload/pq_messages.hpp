// Messages for the application, in libpq's places: a line added to a
// PGconn's error message (PQerrorMessage), a PGconn that failed before it
// started, and the one-line warning when with_rsocket=true falls back.
//
// libpq 15 exports no call that adds to a PGconn's error message. Its
// PQExpBufferData is found inside the PGconn once per process: the word
// that holds the very pointer PQerrorMessage() returns, followed by the
// buffer's length (malloc_usable_size bounds the search). If it cannot be
// found (a libpq we do not know), the line goes to stderr instead.
#pragma once

#include <libpq-fe.h>

#include <string_view>

namespace pg_rdma::client {

// Appends `line` (newline included) to conn's error message.
void append_error(PGconn* conn, std::string_view line) noexcept;

// A PGconn in CONNECTION_BAD whose error message is exactly `message`, as
// libpq returns for a bad option value (no connection was attempted);
// nullptr only when memory ran out, as PQconnectStart.
PGconn* failed_connection(std::string_view message) noexcept;

// "WARNING: ...": with_rsocket=true could not use RDMA for this attempt
// and the session continues over TCP. One line on stderr, where libpq's
// default notice processor writes too.
void warn_fallback(const PGconn* conn, std::string_view reason) noexcept;
// One line on stderr about an established session: "WARNING:  with_rsocket: "
// what, reason, after. For what happens inside a read or write, where no
// PGconn is at hand (a failover onto TCP, RDMA failing for good).
void warn_session_event(std::string_view what, std::string_view reason, std::string_view after) noexcept;
// `text` on stderr as it is (the caller's newline included).
void write_stderr(std::string_view text) noexcept;

}  // namespace pg_rdma::client
