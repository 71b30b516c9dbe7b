// What differs between the PostgreSQL major versions pg_rdma builds
// against, in one place: each entry is one small function with one
// behaviour, whatever the version. Include after server_ext/pg_headers.hpp.
#pragma once

#include "server_ext/pg_headers.hpp"

#include <fcntl.h>
#include <unistd.h>

extern "C" {
#include "libpq/hba.h"
#include "utils/pidfile.h"
#if PG_VERSION_NUM >= 180000
#include "tcop/backend_startup.h"
#include "tcop/tcopprot.h"
#else
// Exported by the postgres executable, declared in its headers from 18 on.
extern bool Log_disconnections;
#endif
}

namespace pg_rdma::server::compat {

// An authentication file (pg_hba.conf) read as PostgreSQL's own tokenizer
// reads it, its lines (TokenizedAuthLine) in CurrentMemoryContext. From 16
// on, the tokenizer keeps its memory in a context of its own that
// end_reading_auth_file() frees: parse the lines before ending.
struct AuthFileReading {
    FILE* file = nullptr;
};

// False when the file cannot be opened (logged at `elevel`).
inline bool read_auth_file(const char* path, int elevel, List** lines, AuthFileReading& reading) {
#if PG_VERSION_NUM >= 160000
    reading.file = open_auth_file(path, elevel, 0, nullptr);
    if (reading.file == nullptr) return false;
    tokenize_auth_file(path, reading.file, lines, elevel, 0);
#else
    reading.file = AllocateFile(path, "r");
    if (reading.file == nullptr) {
        const int saved_errno = errno;  // %m is not ISO C++'s
        ereport(elevel, (errcode_for_file_access(), errmsg("could not open file \"%s\": %s", path, strerror(saved_errno))));
        return false;
    }
    // Its own memory context, a child of the current one: freed with it.
    (void)tokenize_auth_file(path, reading.file, lines, elevel);
#endif
    return true;
}

inline void end_reading_auth_file(AuthFileReading& reading) {
    if (reading.file == nullptr) return;
#if PG_VERSION_NUM >= 160000
    free_auth_file(reading.file, 0);
#else
    FreeFile(reading.file);
#endif
    reading.file = nullptr;
}

// Whether a tokenized line holds text from another file than `top` (an
// @file reference; from 16 on also include, include_if_exists, include_dir).
inline bool auth_line_from_other_file(const TokenizedAuthLine* line, const char* top) {
#if PG_VERSION_NUM >= 160000
    return line->file_name == nullptr || std::strcmp(line->file_name, top) != 0 ||
           (line->raw_line != nullptr && std::strchr(line->raw_line, '@') != nullptr);
#else
    (void)top;
    return line->raw_line == nullptr || std::strchr(line->raw_line, '@') != nullptr;
#endif
}

// This backend's client socket, or -1 when there is none (yet). 17 builds
// the Port (MyProcPort) only after registering the socket with the
// backend's wait set; from then on the socket the postmaster handed over
// is in MyClientSocket, set before the backend's main function runs.
inline int client_socket() {
    if (MyProcPort != nullptr) return MyProcPort->sock;
#if PG_VERSION_NUM >= 170000
    if (MyClientSocket != nullptr) return MyClientSocket->sock;
#endif
    return -1;
}

// Starts a set-returning function that returns a tuplestore (materialize
// mode), with no options. 16 renamed SetSingleFuncCall.
inline void init_materialized_srf(FunctionCallInfo fcinfo) {
#if PG_VERSION_NUM >= 160000
    InitMaterializedSRF(fcinfo, 0);
#else
    SetSingleFuncCall(fcinfo, 0);
#endif
}

// Whether the postmaster started this backend only to refuse the session
// (starting up, shutting down, a standby not yet open for connections).
// Up to 16 its verdict is in the Port. 17 keeps it only in a parameter of
// BackendInitialize(), so the status line the postmaster writes into
// postmaster.pid answers instead: it names every such state except "too
// many children" (which PostgreSQL then reports over RDMA). A file that
// cannot be read answers "not refused": PostgreSQL still decides.
inline bool backend_started_to_refuse() {
#if PG_VERSION_NUM >= 170000
    // postmaster.pid is a few short lines; the status is line 8.
    constexpr size_t pid_file_max_bytes = 1024;
    char text[pid_file_max_bytes + 1];
    char path[MAXPGPATH];
    snprintf(path, sizeof path, "%s/postmaster.pid", DataDir);
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const ssize_t n = ::read(fd, text, pid_file_max_bytes);
    ::close(fd);
    if (n <= 0) return false;
    text[n] = '\0';
    const char* line = text;
    for (int i = 1; i < LOCK_FILE_LINE_PM_STATUS && line != nullptr; ++i) {
        line = std::strchr(line, '\n');
        if (line != nullptr) ++line;
    }
    if (line == nullptr || *line == '\0') return false;  // no status line: PostgreSQL decides
    return std::strncmp(line, PM_STATUS_READY, std::strlen(PM_STATUS_READY)) != 0;
#else
    return MyProcPort->canAcceptConnections != CAC_OK;
#endif
}

// Whether log_connections asks for a line when a connection is received
// (the moment pg_rdma reports its transport). 18 made the setting a list
// of aspects; "on" includes receipt.
inline bool log_connection_receipt() {
#if PG_VERSION_NUM >= 180000
    return (log_connections & LOG_CONNECTION_RECEIPT) != 0;
#else
    return Log_connections;
#endif
}

inline bool log_disconnections() { return Log_disconnections; }

}  // namespace pg_rdma::server::compat
