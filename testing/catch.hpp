// The one header every Catch2 test includes: Debian 12 ships Catch2 2.13
// (one big header), Debian 13 and later ship Catch2 3 (split headers, a
// compiled library, matchers renamed). Tests use only what both provide,
// plus the names defined here for what differs.
#pragma once

#include <string>

#if __has_include(<catch2/catch_test_macros.hpp>)
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

namespace testing {
// Matches a string that contains TEXT (case-sensitive).
inline auto contains_text(const std::string& text) { return Catch::Matchers::ContainsSubstring(text); }
}  // namespace testing
#else
#include <catch2/catch.hpp>

namespace testing {
inline auto contains_text(const std::string& text) { return Catch::Matchers::Contains(text); }
}  // namespace testing
#endif
