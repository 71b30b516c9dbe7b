#include "server_ext/session_outcomes.hpp"

#include <cerrno>
#include <set>
#include <string>

#include "testing/catch.hpp"

using pg_rdma::server::classify_fallback;
using pg_rdma::server::kOutcomeCount;
using pg_rdma::server::Outcome;
using pg_rdma::server::outcome_from_name;
using pg_rdma::server::outcome_name;

TEST_CASE("a fallback's errno value names its cause") {
    REQUIRE(classify_fallback(ENOMEM) == Outcome::Memlock);
    REQUIRE(classify_fallback(ENODEV) == Outcome::NoDevice);
    REQUIRE(classify_fallback(EADDRNOTAVAIL) == Outcome::NoDevice);
    REQUIRE(classify_fallback(ELIBACC) == Outcome::NoDevice);
    REQUIRE(classify_fallback(EMFILE) == Outcome::Descriptors);
    REQUIRE(classify_fallback(ENFILE) == Outcome::Descriptors);
    REQUIRE(classify_fallback(ETIMEDOUT) == Outcome::Timeout);
    REQUIRE(classify_fallback(ECONNABORTED) == Outcome::ClientGaveUp);
}

TEST_CASE("a fallback with any other errno value is a setup error") {
    REQUIRE(classify_fallback(EIO) == Outcome::SetupError);
    REQUIRE(classify_fallback(EPROTO) == Outcome::SetupError);
    REQUIRE(classify_fallback(0) == Outcome::SetupError);
}

TEST_CASE("every outcome has its own lower-case name, which names it back") {
    std::set<std::string> seen;
    for (std::size_t i = 0; i < kOutcomeCount; ++i) {
        const auto outcome = static_cast<Outcome>(i);
        const std::string name(outcome_name(outcome));
        REQUIRE(!name.empty());
        REQUIRE(name != "unknown");
        for (char c : name) REQUIRE(((c >= 'a' && c <= 'z') || c == '_'));
        REQUIRE(seen.insert(name).second);
        REQUIRE(outcome_from_name(name) == outcome);
    }
    REQUIRE(outcome_name(Outcome::Upgraded) == "upgraded");
    REQUIRE(outcome_name(Outcome::NoDevice) == "no_device");
    REQUIRE(outcome_name(Outcome::FailedOver) == "failed_over");
    REQUIRE(!outcome_from_name("no_such_outcome"));
}
