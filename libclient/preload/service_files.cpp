// The service-file scope and the fopen that honours it (service_files.hpp).
#include "libclient/preload/service_files.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "libclient/preload/libc_calls.hpp"

namespace pg_rdma::client {
namespace {

__attribute__((tls_model("initial-exec"))) thread_local const ServiceFileScope* t_scope = nullptr;

// A read-only stream over `text`, freed by fclose. glibc's fmemopen with a
// null buffer owns its buffer and reads stop at what was written.
FILE* memory_stream(const std::string& text) noexcept {
    if (text.empty()) return nullptr;
    FILE* f = fmemopen(nullptr, text.size(), "w+");
    if (f == nullptr) return nullptr;
    if (std::fwrite(text.data(), 1, text.size(), f) != text.size() || std::fseek(f, 0, SEEK_SET) != 0) {
        std::fclose(f);
        return nullptr;
    }
    return f;
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

const ServiceFileScope* ServiceFileScope::current() noexcept { return t_scope; }

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

std::optional<std::string> service_section_value(const std::optional<std::string>& service) {
    std::optional<std::string> name = service;
    if (!name)
        if (const char* env = std::getenv("PGSERVICE")) name = env;
    if (!name) return std::nullopt;
    return conninfo::service_value(*name, conninfo::current_service_environment(), read_whole_file);
}

}  // namespace pg_rdma::client

using namespace pg_rdma::client;

// Named by its symbol: the build's _FILE_OFFSET_BITS=64 makes <stdio.h>
// redirect a definition of fopen to fopen64, and libpq 15 calls fopen.
extern "C" __attribute__((visibility("default"))) FILE* interposed_fopen(const char* path, const char* mode) __asm__(
    "fopen");
extern "C" FILE* interposed_fopen(const char* path, const char* mode) {
    const auto real = libc().fopen;
    const ServiceFileScope* scope = ServiceFileScope::current();
    if (scope == nullptr || mode == nullptr || std::strcmp(mode, "r") != 0 || !scope->covers(path))
        return real(path, mode);
    try {
        const auto text = read_whole_file(path);
        if (!text) return real(path, mode);  // libpq reports what fopen says
        const auto hidden = pg_rdma::conninfo::without_keyword_lines(*text);
        if (!hidden) return real(path, mode);
        if (FILE* f = memory_stream(*hidden)) return f;
    } catch (...) {
    }
    errno = ENOMEM;
    return nullptr;
}
