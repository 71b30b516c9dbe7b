// libpq's connect_timeout as libpq 15 reads it (parse_int_param, then
// connectDBComplete): an integer number of seconds with optional blanks
// around it; a positive value below 2 counts as 2; 0 or a negative value
// means no limit. The RDMA setup of a connection attempt uses it as its
// own bound (preload/upgrade_driver.cpp).
#pragma once

#include <optional>

namespace pg_rdma::conninfo {

inline constexpr long kLibpqMinimumConnectTimeoutS = 2;  // seconds

// The limit in seconds; nullopt when there is none (absent, 0, negative)
// or the text is not libpq's integer (libpq then fails the connection
// itself).
std::optional<long> connect_timeout_seconds(const char* value) noexcept;

}  // namespace pg_rdma::conninfo
