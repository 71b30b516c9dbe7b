// The order of the policy's sources (precedence.hpp).
#include "libclient/conninfo/precedence.hpp"

#include <cstdlib>

namespace pg_rdma::conninfo {

std::string_view source_name(PolicySource source) {
    switch (source) {
    case PolicySource::Default: return "default";
    case PolicySource::Environment: return "environment";
    case PolicySource::ServiceFile: return "service file";
    case PolicySource::Connection: return "connection";
    }
    return "unknown";
}

ResolvedPolicy resolve_policy(const PolicyInputs& inputs) {
    const std::optional<std::string>* winner = nullptr;
    ResolvedPolicy resolved;
    if (inputs.connection) {
        winner = &inputs.connection;
        resolved.source = PolicySource::Connection;
    } else if (inputs.service) {
        winner = &inputs.service;
        resolved.source = PolicySource::ServiceFile;
    } else if (inputs.environment) {
        winner = &inputs.environment;
        resolved.source = PolicySource::Environment;
    } else {
        return resolved;
    }
    resolved.value = *winner;
    PolicyValue parsed = parse_policy_value(**winner);
    if (parsed.ok())
        resolved.policy = *parsed.policy;
    else
        resolved.error = std::move(parsed.error);
    return resolved;
}

std::optional<std::string> environment_value() {
    const char* value = std::getenv(kEnvironmentVariable);
    if (value == nullptr)
        return std::nullopt;
    return std::string(value);
}

}  // namespace pg_rdma::conninfo
