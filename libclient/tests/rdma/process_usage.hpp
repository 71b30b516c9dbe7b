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

// A descriptor the RDMA libraries keep for the process's lifetime once a
// device was used: librdmacm opens each device (its verbs context and that
// context's async event channel) once and keeps it. A session's own
// (rdma_cm, epoll, eventfd, timerfd, its sockets) are never among them.
inline bool kept_for_the_process(const std::string& target) {
    return target.rfind("/dev/infiniband/uverbs", 0) == 0 || target == "anon_inode:[infinibandevent]";
}

// The descriptors of `fds` that a session may own: all but those above.
inline std::size_t session_descriptors(const std::map<int, std::string>& fds) {
    std::size_t n = 0;
    for (const auto& [fd, target] : fds) n += kept_for_the_process(target) ? 0 : 1;
    return n;
}

}  // namespace pg_rdma::client_tests
