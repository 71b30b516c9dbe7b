// An owned directory stream: the C library's DIR* has no owner, and a
// handle dropped on an early return or an exception is a descriptor lost
// for the life of the process (a PostgreSQL backend's lives for a session).
#pragma once

#include <dirent.h>

#include <memory>

namespace pg_rdma::transport {

struct DirectoryCloser {
    void operator()(DIR* dir) const noexcept { closedir(dir); }
};
using Directory = std::unique_ptr<DIR, DirectoryCloser>;

// Empty when `path` cannot be opened; errno says why.
inline Directory open_directory(const char* path) noexcept { return Directory(opendir(path)); }

// How many entries `path` holds, not counting "." and ".." (nor any other
// name that starts with a dot); -1 when it cannot be opened. Counting
// /proc/self/fd includes the stream's own descriptor.
inline int count_entries(const char* path) noexcept {
    const Directory dir = open_directory(path);
    if (!dir) return -1;
    int n = 0;
    while (const dirent* entry = readdir(dir.get()))
        if (entry->d_name[0] != '.') ++n;
    return n;
}

}  // namespace pg_rdma::transport
