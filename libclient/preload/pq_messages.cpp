#include "libclient/preload/pq_messages.hpp"

#include <malloc.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <string>

#include "libclient/preload/conn_policy.hpp"
#include "libclient/preload/libc_calls.hpp"
#include "libclient/preload/libpq_calls.hpp"

namespace pg_rdma::client {
namespace {

constexpr std::ptrdiff_t kUnknown = -1;
constexpr std::ptrdiff_t kNotFound = -2;
std::atomic<std::ptrdiff_t> g_error_offset{kUnknown};

std::ptrdiff_t find_error_buffer(const PGconn* conn) noexcept {
    const char* data = libpq().PQerrorMessage(conn);
    const auto* base = reinterpret_cast<const unsigned char*>(conn);
    const std::size_t size = malloc_usable_size(const_cast<PGconn*>(conn));
    const std::size_t len = std::strlen(data);
    for (std::size_t off = 0; off + sizeof(ExpBuffer) <= size; off += alignof(ExpBuffer)) {
        ExpBuffer candidate;
        std::memcpy(&candidate, base + off, sizeof candidate);
        if (candidate.data == data && candidate.len == len && candidate.maxlen > len)
            return static_cast<std::ptrdiff_t>(off);
    }
    return kNotFound;
}

ExpBuffer* error_buffer(PGconn* conn) noexcept {
    std::ptrdiff_t off = g_error_offset.load(std::memory_order_acquire);
    if (off == kUnknown) {
        off = find_error_buffer(conn);
        g_error_offset.store(off, std::memory_order_release);
    }
    if (off < 0) return nullptr;
    auto* buffer = reinterpret_cast<ExpBuffer*>(reinterpret_cast<unsigned char*>(conn) + off);
    // Check again on this PGconn: it must still be the buffer PQerrorMessage reads.
    if (buffer->data != libpq().PQerrorMessage(conn)) return nullptr;
    return buffer;
}

}  // namespace

void write_stderr(std::string_view text) noexcept {
    while (!text.empty()) {
        const ssize_t n = libc().write(2, text.data(), text.size());
        if (n <= 0) return;
        text.remove_prefix(static_cast<std::size_t>(n));
    }
}

void append_error(PGconn* conn, std::string_view line) noexcept {
    try {
        const std::string copy(line);
        if (ExpBuffer* buffer = conn != nullptr ? error_buffer(conn) : nullptr)
            libpq().appendPQExpBufferStr(buffer, copy.c_str());
        else
            write_stderr(copy);
    } catch (...) {
        write_stderr(line);
    }
}

PGconn* failed_connection(std::string_view message) noexcept {
    // An option libpq does not know fails at once, before any connection.
    PGconn* conn = libpq().PQconnectStart("with_rsocket=");
    if (conn == nullptr) return nullptr;
    try {
        const std::string copy(message);
        if (ExpBuffer* buffer = error_buffer(conn)) {
            libpq().resetPQExpBuffer(buffer);
            libpq().appendPQExpBufferStr(buffer, copy.c_str());
        } else {
            write_stderr(copy);
        }
    } catch (...) {
        write_stderr(message);
    }
    return conn;
}

void warn_fallback(const PGconn* conn, std::string_view reason) noexcept {
    note_fallback(conn, reason);  // for PQrdmaAttribute(conn, "reason")
    try {
        const char* host = conn != nullptr ? libpq().PQhost(conn) : nullptr;
        const char* port = conn != nullptr ? libpq().PQport(conn) : nullptr;
        std::string line = "WARNING:  with_rsocket: RDMA is not possible";
        if (host != nullptr && *host != '\0') {
            line += " for server \"";
            line += host;
            line += '"';
            if (port != nullptr && *port != '\0') {
                line += ", port ";
                line += port;
            }
        }
        line += ": ";
        line += reason;
        line += "; continuing over TCP\n";
        write_stderr(line);
    } catch (...) {
        write_stderr("WARNING:  with_rsocket: RDMA is not possible; continuing over TCP\n");
    }
}

void warn_session_event(std::string_view what, std::string_view reason, std::string_view after) noexcept {
    try {
        std::string line = "WARNING:  with_rsocket: ";
        line += what;
        line += reason;
        line += after;
        line += '\n';
        write_stderr(line);
    } catch (...) {
        write_stderr(what);
        write_stderr("\n");
    }
}

}  // namespace pg_rdma::client
