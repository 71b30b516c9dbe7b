// The directory-stream owner: closed on every way out, and the entry count
// the descriptor checks of the other tests rely on.
#include "transport/directory.hpp"

#include "testing/catch.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <stdexcept>
#include <string>

using pg_rdma::transport::count_entries;
using pg_rdma::transport::open_directory;

namespace {

struct TempDir {
    std::string path;
    TempDir() {
        char name[] = "/tmp/pg_rdma_directory_test.XXXXXX";
        if (mkdtemp(name) == nullptr) throw std::runtime_error("mkdtemp failed");
        path = name;
    }
    ~TempDir() {
        for (const char* f : {"a", "b", ".hidden"}) unlink((path + "/" + f).c_str());
        rmdir(path.c_str());
    }
    void touch(const char* name) const {
        const int fd = open((path + "/" + name).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        if (fd < 0) throw std::runtime_error("cannot create a file");
        close(fd);
    }
};

int open_descriptors() { return count_entries("/proc/self/fd") - 1; }

}  // namespace

TEST_CASE("count_entries counts names that do not start with a dot") {
    const TempDir dir;
    CHECK(count_entries(dir.path.c_str()) == 0);
    dir.touch("a");
    dir.touch("b");
    dir.touch(".hidden");
    CHECK(count_entries(dir.path.c_str()) == 2);
}

TEST_CASE("a directory that cannot be opened counts -1 and sets errno") {
    errno = 0;
    CHECK(count_entries("/nonexistent/pg_rdma/directory") == -1);
    CHECK(errno == ENOENT);
    CHECK_FALSE(open_directory("/nonexistent/pg_rdma/directory"));
}

TEST_CASE("a directory stream is closed when its owner goes, on an exception too") {
    const int before = open_descriptors();
    REQUIRE(before > 0);
    for (int i = 0; i < 100; ++i) {
        try {
            const auto dir = open_directory("/proc/self");
            REQUIRE(dir);
            throw std::runtime_error("left early");
        } catch (const std::runtime_error&) {
        }
    }
    CHECK(open_descriptors() == before);
}
