// pg_service.conf sections with with_rsocket, for libpq 15 (which rejects a
// keyword it does not know in the section it reads).
//
// A wrapper that lets libpq read service files (the PQconnect* family,
// PQsetdbLogin, PQconndefaults) holds a ServiceFileScope around the real
// call. While it is held, this thread's fopen(path, "r") of one of the
// service files libpq would read at that moment (conninfo/service_file.hpp)
// returns the file with our lines turned into comments of the same length
// (a memory stream), so libpq applies everything else in the section
// itself, with its own errors and line numbers. Any other fopen, and every
// fopen outside a scope, is libc's, after one thread-local check.
#pragma once

#include <optional>
#include <string>

#include "libclient/conninfo/service_file.hpp"

namespace pg_rdma::client {

class ServiceFileScope {
public:
    ServiceFileScope() noexcept;
    ~ServiceFileScope();
    ServiceFileScope(const ServiceFileScope&) = delete;
    ServiceFileScope& operator=(const ServiceFileScope&) = delete;

    // Whether libpq's fopen of `path` is of a service file this scope hides
    // our lines in.
    [[nodiscard]] bool covers(const char* path) const noexcept;

    [[nodiscard]] static const ServiceFileScope* current() noexcept;

private:
    const ServiceFileScope* outer_;
    std::optional<conninfo::ServiceFiles> files_;  // absent: out of memory, hides nothing
};

// A file's whole contents through libc; nullopt when it cannot be read.
std::optional<std::string> read_whole_file(const std::string& path);

// The with_rsocket value the section of `service` (or, when nullopt,
// PGSERVICE's) gives; nullopt when no service is named or it says nothing.
std::optional<std::string> service_section_value(const std::optional<std::string>& service);

}  // namespace pg_rdma::client
