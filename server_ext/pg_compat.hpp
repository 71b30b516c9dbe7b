// What differs between the PostgreSQL major versions pg_rdma builds
// against, in one place: each entry is one small function with one
// behaviour, whatever the version. Include after server_ext/pg_headers.hpp.
#pragma once

#include "server_ext/pg_headers.hpp"

extern "C" {
#include "libpq/hba.h"
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

}  // namespace pg_rdma::server::compat
