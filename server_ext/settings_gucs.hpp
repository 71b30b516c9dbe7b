// The pg_rdma.* configuration parameters (GUCs): their definitions, and the
// transport::Settings they describe. Called from _PG_init in the postmaster.
#pragma once

#include <cstdint>
#include <string_view>

#include "transport/settings.hpp"

namespace pg_rdma::server {

// DefineCustom*Variable for every pg_rdma.* parameter. Each takes its boot
// value from transport::Settings{}, so the defaults live in one place.
void define_settings_gucs();

// The transport settings the parameters give, and why they cannot be used
// (empty when they can; see transport::settings_problem).
transport::Settings settings_from_gucs();
std::string_view settings_gucs_problem();

// What one RDMA session pins with these settings, in bytes.
std::uint64_t session_pinned_bytes();

// pg_rdma.output_batching as set now (a session may change it).
bool output_batching_guc();

// pg_rdma.client_library as set ("" when server processes' libpq stays plain).
const char* client_library_guc();

// pg_rdma.listen_addresses as set ("" when RDMA listening is off).
const char* rdma_listen_addresses_guc();

}  // namespace pg_rdma::server
