// What a test client holds of the machine's resources, read from /proc:
// the crowd's figures at its peak and the pool's before and after.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <system_error>

namespace pg_rdma::client_tests {

// This process's pinned memory (VmPin, kB): RDMA sessions' registered rings.
inline long pinned_kb() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("VmPin:", 0) == 0) return std::atol(line.c_str() + 6);
    return -1;
}

// This process's open descriptors, each with what it refers to (the
// directory's own descriptor among them).
inline std::map<int, std::string> open_descriptors() {
    std::map<int, std::string> fds;
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
        std::error_code link_ec;
        const auto target = std::filesystem::read_symlink(it->path(), link_ec);
        fds[std::atoi(it->path().filename().c_str())] = link_ec ? "?" : target.string();
    }
    return fds;
}

}  // namespace pg_rdma::client_tests
