// Where the policy of one connection comes from, strongest first (issue 8):
//   1. with_rsocket written for this connection: keyword/value string, URI
//      query, keyword arrays (the value libpq's order would keep);
//   2. the pg_service.conf section the connection names (service= or
//      PGSERVICE), as libpq applies a section: only to keywords the
//      connection did not set, and within the section the first line for a
//      keyword wins (parseServiceFile never overwrites a value);
//   3. the environment variable WITH_RSOCKET, like PGSSLMODE for sslmode
//      (the servers file's rule for the address an attempt connects to
//      comes before it: applied at connect(), libclient/preload/
//      driver_policy.hpp, for a choice from here or 4);
//   4. nothing: Off, plain libpq.
// As in libpq, only the value that wins is validated: a bad WITH_RSOCKET is
// no error when the connection says with_rsocket=false, and an empty value
// present at some level is that level's value (and invalid), not absence.
// The service file is read by service_file.hpp; its caller passes the
// section's value here.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "libclient/conninfo/policy.hpp"

namespace pg_rdma::conninfo {

enum class PolicySource { Default, Environment, ServiceFile, Connection };

std::string_view source_name(PolicySource source);

struct PolicyInputs {
    std::optional<std::string> connection;   // Extraction::value / ArraysExtraction::value
    std::optional<std::string> service;      // the service section's with_rsocket line
    std::optional<std::string> environment;  // WITH_RSOCKET when set, even to ""
};

struct ResolvedPolicy {
    RsocketPolicy policy = RsocketPolicy::Off;  // Off when !ok()
    PolicySource source = PolicySource::Default;
    // The winning value as written (what PQconninfo reports), absent by default.
    std::optional<std::string> value;
    std::string error;  // libpq-style message when the winning value is invalid

    [[nodiscard]] bool ok() const { return error.empty(); }
};

ResolvedPolicy resolve_policy(const PolicyInputs& inputs);

// WITH_RSOCKET as the process sees it now (getenv), nullopt when unset.
std::optional<std::string> environment_value();

}  // namespace pg_rdma::conninfo
