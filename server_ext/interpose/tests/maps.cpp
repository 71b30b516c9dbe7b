#include "server_ext/interpose/tests/maps.hpp"

#include <cinttypes>
#include <cstdint>
#include <cstdio>

namespace pg_rdma::interpose::test {

std::string mapping_permissions(const void* address) {
    const auto a = reinterpret_cast<std::uintptr_t>(address);
    std::FILE* maps = std::fopen("/proc/self/maps", "r");
    if (maps == nullptr) return "";
    char line[512];
    std::string found;
    while (std::fgets(line, sizeof line, maps) != nullptr) {
        std::uintptr_t start = 0, end = 0;
        char perms[8] = "";
        if (std::sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s", &start, &end, perms) != 3) continue;
        if (a >= start && a < end) {
            found = perms;
            break;
        }
    }
    std::fclose(maps);
    return found;
}

}  // namespace pg_rdma::interpose::test
