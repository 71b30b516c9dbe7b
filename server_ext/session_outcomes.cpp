#include "server_ext/session_outcomes.hpp"

#include <array>
#include <cerrno>

namespace pg_rdma::server {
namespace {

// In Outcome's order.
constexpr std::array<std::string_view, kOutcomeCount> kNames = {
    "upgraded",    "not_requested", "no_device",    "memlock",     "descriptors",
    "timeout",     "client_gave_up", "not_offered", "not_accepting", "hba_rejects",
    "over_cap",    "setup_error",   "setup_failed", "failed_over", "failed",
    "probe",
};

}  // namespace

std::string_view outcome_name(Outcome outcome) noexcept {
    const auto i = static_cast<std::size_t>(outcome);
    return i < kNames.size() ? kNames[i] : std::string_view("unknown");
}

std::optional<Outcome> outcome_from_name(std::string_view name) noexcept {
    for (std::size_t i = 0; i < kNames.size(); ++i)
        if (kNames[i] == name) return static_cast<Outcome>(i);
    return std::nullopt;
}

Outcome classify_fallback(int code) noexcept {
    switch (code) {
        // The transport's own check says ENOMEM for RLIMIT_MEMLOCK, and
        // memory registration under a low limit fails with it too.
        case ENOMEM: return Outcome::Memlock;
        // No device for the address, none that opens, or no verbs library.
        case ENODEV:
        case ENXIO:
        case EADDRNOTAVAIL:
        case ELIBACC: return Outcome::NoDevice;
        case EMFILE:
        case ENFILE: return Outcome::Descriptors;
        case ETIMEDOUT: return Outcome::Timeout;
        case ECONNABORTED: return Outcome::ClientGaveUp;
        default: return Outcome::SetupError;
    }
}

}  // namespace pg_rdma::server
