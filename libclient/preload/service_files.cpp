// The service-file scope and the fopen that honours it (service_files.hpp).
#include "libclient/preload/service_files.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "libclient/preload/libc_calls.hpp"

namespace pg_rdma::client {
namespace {

__attribute__((tls_model("initial-exec"))) thread_local ServiceFileScope* t_scope = nullptr;

// A read-only stream over a copy of `text`, freed by fclose. (Not
// fmemopen: in "w+" mode glibc keeps the buffer's last byte for a NUL, which
// would cut the last line of a file without a final newline.)
struct TextCookie {
    std::string text;
    std::size_t pos = 0;
};

ssize_t cookie_read(void* cookie, char* buf, size_t size) {
    auto* c = static_cast<TextCookie*>(cookie);
    const std::size_t n = std::min(size, c->text.size() - c->pos);
    std::memcpy(buf, c->text.data() + c->pos, n);
    c->pos += n;
    return static_cast<ssize_t>(n);
}

int cookie_close(void* cookie) {
    delete static_cast<TextCookie*>(cookie);
    return 0;
}

FILE* memory_stream(std::string text) noexcept {
    try {
        auto* cookie = new TextCookie{std::move(text)};
        cookie_io_functions_t io{};
        io.read = cookie_read;
        io.close = cookie_close;
        FILE* f = fopencookie(cookie, "r", io);
        if (f == nullptr) delete cookie;
        return f;
    } catch (...) {
        return nullptr;
    }
}

}  // namespace

ServiceFileScope::ServiceFileScope() noexcept : outer_(t_scope) {
    try {
        files_ = conninfo::service_files(conninfo::current_service_environment());
    } catch (...) {
        files_.reset();
    }
    t_scope = this;
}

ServiceFileScope::~ServiceFileScope() { t_scope = outer_; }

bool ServiceFileScope::covers(const char* path) const noexcept {
    if (!files_ || path == nullptr) return false;
    return (files_->user && *files_->user == path) || files_->system == path;
}

ServiceFileScope* ServiceFileScope::current() noexcept { return t_scope; }

std::optional<std::string> ServiceFileScope::read(const std::string& path) {
    if (auto it = texts_.find(path); it != texts_.end()) return it->second;
    auto text = read_whole_file(path);
    texts_.emplace(path, text);
    return text;
}

std::optional<std::string> ServiceFileScope::section_value(const std::optional<std::string>& service) {
    std::optional<std::string> name = service;
    if (!name)
        if (const char* env = std::getenv("PGSERVICE")) name = env;
    if (!name) return std::nullopt;
    return conninfo::service_value(*name, conninfo::current_service_environment(),
                                   [this](const std::string& path) { return read(path); });
}

std::optional<std::string> read_whole_file(const std::string& path) {
    FILE* f = libc().fopen(path.c_str(), "r");
    if (f == nullptr) return std::nullopt;
    std::string text;
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    const bool failed = std::ferror(f) != 0;
    std::fclose(f);
    if (failed) return std::nullopt;
    return text;
}


}  // namespace pg_rdma::client

using namespace pg_rdma::client;

namespace {

FILE* open_for_libpq(FILE* (*real)(const char*, const char*), const char* path, const char* mode) noexcept {
    ServiceFileScope* scope = ServiceFileScope::current();
    if (scope == nullptr || mode == nullptr || std::strcmp(mode, "r") != 0 || !scope->covers(path))
        return real(path, mode);
    try {
        const auto text = scope->read(path);
        if (!text) return real(path, mode);  // libpq reports what fopen says
        auto hidden = pg_rdma::conninfo::without_keyword_lines(*text);
        if (!hidden) return real(path, mode);
        if (FILE* f = memory_stream(std::move(*hidden))) return f;
    } catch (...) {
    }
    errno = ENOMEM;
    return nullptr;
}

}  // namespace

// Named by their symbols: the build's _FILE_OFFSET_BITS=64 makes <stdio.h>
// redirect a definition of fopen to fopen64. Debian's amd64 libpq 15 calls
// fopen; a libpq built with 64-bit file offsets on a 32-bit system calls
// fopen64.
extern "C" __attribute__((visibility("default"))) FILE* interposed_fopen(const char* path, const char* mode) __asm__(
    "fopen");
extern "C" FILE* interposed_fopen(const char* path, const char* mode) {
    return open_for_libpq(libc().fopen, path, mode);
}

extern "C" __attribute__((visibility("default"))) FILE* interposed_fopen64(const char* path, const char* mode) __asm__(
    "fopen64");
extern "C" FILE* interposed_fopen64(const char* path, const char* mode) {
    return open_for_libpq(libc().fopen64, path, mode);
}
