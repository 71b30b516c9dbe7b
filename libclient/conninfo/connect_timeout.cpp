#include "libclient/conninfo/connect_timeout.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>

namespace pg_rdma::conninfo {

std::optional<long> connect_timeout_seconds(const char* value) noexcept {
    if (value == nullptr) return std::nullopt;
    char* end = nullptr;
    errno = 0;
    const long seconds = std::strtol(value, &end, 10);  // skips leading blanks, as libpq's
    if (end == value || errno != 0 || seconds < INT_MIN || seconds > INT_MAX) return std::nullopt;
    while (*end != '\0' && std::isspace(static_cast<unsigned char>(*end))) ++end;
    if (*end != '\0' || seconds <= 0) return std::nullopt;
    return std::max(seconds, kLibpqMinimumConnectTimeoutS);
}

}  // namespace pg_rdma::conninfo
