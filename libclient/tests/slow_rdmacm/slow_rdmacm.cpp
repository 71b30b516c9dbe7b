// A stand-in librdmacm.so.1 for rdma_libraries_fork_test: its constructor
// runs inside rdma_libraries.cpp's dlopen(), so while it sleeps another
// thread's load is known to be in progress. It says so first, with a byte
// on the descriptor named by SLOW_RDMACM_READY_FD, then sleeps
// SLOW_RDMACM_SLEEP_MS. It defines no rdma_* function, so the load ends
// with a problem ("has no rdma_..."), which is what the test expects to read.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>

namespace {

int env_int(const char* name, int fallback) {
    const char* value = std::getenv(name);
    return value != nullptr ? std::atoi(value) : fallback;
}

[[gnu::constructor]] void announce_then_sleep() {
    constexpr int kDefaultSleepMs = 300;
    constexpr long kNsPerMs = 1'000'000;
    const int fd = env_int("SLOW_RDMACM_READY_FD", -1);
    if (fd >= 0) {
        const char byte = 'L';
        (void)!write(fd, &byte, 1);
    }
    const int ms = env_int("SLOW_RDMACM_SLEEP_MS", kDefaultSleepMs);
    timespec left{ms / 1000, (ms % 1000) * kNsPerMs};
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {
    }
}

}  // namespace
