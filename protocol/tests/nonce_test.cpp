// Nonces come from OpenSSL's CSPRNG: fresh on every call.
#include "testing/catch.hpp"

#include <algorithm>
#include <set>

#include "protocol/upgrade.hpp"

using namespace pg_rdma::protocol;

TEST_CASE("a generated nonce is not all zeros") {
    Nonce n{};
    REQUIRE(generate_nonce(n));
    // 2^-256 chance of a false failure.
    CHECK(std::any_of(n.begin(), n.end(), [](std::uint8_t b) { return b != 0; }));
}

TEST_CASE("every generated nonce is different") {
    constexpr std::size_t kDraws = 1000;
    std::set<Nonce> seen;
    for (std::size_t i = 0; i < kDraws; ++i) {
        Nonce n{};
        REQUIRE(generate_nonce(n));
        seen.insert(n);
    }
    CHECK(seen.size() == kDraws);
}
