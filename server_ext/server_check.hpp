// pg_rdma_check_server(): what a DBA checks before blaming the network.
// Each address of pg_rdma.listen_addresses against the RDMA port behind it,
// the postmaster's memory lock and descriptor limits (which every backend
// inherits) against what a session needs, the caps on sessions in setup,
// and the client library the server's own connections load. No PostgreSQL
// headers: the SQL function (server_check_view.cpp) gathers the inputs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pg_rdma::server {

struct CheckRow {
    std::string item;    // "listen_address", "memlock", "descriptors", "setup_caps", "client_library"
    std::string target;  // what was checked: an address, a limit
    std::string status;  // "ok", "warning" or "problem"
    std::string detail;  // what was found, and for a warning or a problem what to do
};

struct CheckInputs {
    std::string listen_addresses;        // pg_rdma.listen_addresses as set
    int postmaster_pid = 0;
    std::uint64_t session_bytes = 0;     // pinned by one session's buffers (the verbs' own come on top)
    int descriptors_per_session = 0;
    int max_files_per_process = 0;
    int max_unauthenticated_sessions = 0;  // effective (-1 resolved)
    std::uint64_t max_unauthenticated_memory = 0;  // bytes
    std::string client_library;          // pg_rdma.client_library
};

std::vector<CheckRow> check_server(const CheckInputs& in);

// A soft limit from /proc/PID/limits' text ("Max locked memory  65536
// 65536  bytes"); false when the line is missing. `unlimited` for
// "unlimited".
bool parse_proc_limit(std::string_view limits_text, std::string_view name, std::uint64_t& soft, bool& unlimited);

}  // namespace pg_rdma::server
