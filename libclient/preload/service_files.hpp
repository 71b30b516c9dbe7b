// pg_service.conf sections with with_rsocket, for libpq 15 (which rejects a
// keyword it does not know in the section it reads).
//
// A wrapper that lets libpq read service files (the PQconnect* family,
// PQsetdbLogin, PQconndefaults) holds a ServiceFileScope from before it
// looks for with_rsocket until the real call returns. Each service file is
// read once per scope, and the same text serves both our lookup and libpq
// (a FIFO is not consumed twice, and an edit in between cannot split the
// section). While the scope is held, this thread's fopen(path, "r") of one
// of the service files libpq would read at that moment
// (conninfo/service_file.hpp) returns that text with our lines turned into
// comments of the same length, so libpq applies everything else in the
// section itself, with its own errors and line numbers. Any other fopen,
// and every fopen outside a scope, is libc's, after one thread-local check.
#pragma once

#include <map>
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

    // The file's contents as this scope first read them; nullopt when it
    // cannot be read.
    std::optional<std::string> read(const std::string& path);

    // The with_rsocket value the section of `service` (or, when nullopt,
    // PGSERVICE's) gives; nullopt when no service is named or it says nothing.
    std::optional<std::string> section_value(const std::optional<std::string>& service);

    [[nodiscard]] static ServiceFileScope* current() noexcept;

private:
    ServiceFileScope* outer_;
    std::optional<conninfo::ServiceFiles> files_;  // absent: out of memory, hides nothing
    std::map<std::string, std::optional<std::string>> texts_;
};

// A file's whole contents through libc; nullopt when it cannot be read.
std::optional<std::string> read_whole_file(const std::string& path);

}  // namespace pg_rdma::client
