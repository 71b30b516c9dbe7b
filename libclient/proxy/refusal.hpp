// What the proxy tells a client whose connection it cannot carry (no
// server, RDMA refused under `require`, too many connections): a
// PostgreSQL ErrorResponse, as the server itself sends before a session
// exists ("sorry, too many clients already"), so that the client's driver
// shows the reason instead of "server closed the connection unexpectedly".
// Only a client that opened in the clear (StartupMessage, SSLRequest,
// GSSENCRequest) is answered so: a direct-SSL client expects TLS bytes, and
// gets the connection closed.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pg_rdma::proxy {

// SQLSTATEs (PostgreSQL's errcodes.txt).
inline constexpr const char* kSqlStateCannotConnect = "08001";  // sqlclient_unable_to_establish_sqlconnection
inline constexpr const char* kSqlStateTooManyConnections = "53300";

struct Refusal {
    std::string sqlstate;
    std::string message;
    std::string detail;  // empty: left out
    std::string hint;    // empty: left out
};

// The ErrorResponse ('E') of severity FATAL carrying `refusal`.
std::vector<std::uint8_t> error_response(const Refusal& refusal);

// Whether a client whose first bytes are `first_bytes` reads an
// ErrorResponse (it opened in the clear); false when too few are known.
bool answers_in_clear(std::span<const std::uint8_t> first_bytes) noexcept;

}  // namespace pg_rdma::proxy
