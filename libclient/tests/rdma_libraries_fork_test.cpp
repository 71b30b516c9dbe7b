// rdma_libraries.cpp's fork guard: a fork() while another thread is loading
// the RDMA libraries waits for the load, so the child never inherits the
// load lock held by a thread it does not have (it would wait for it for
// ever on its first verbs call). Run with LD_LIBRARY_PATH at the stand-in
// librdmacm.so.1 of slow_rdmacm/ (meson.build), whose constructor says when
// the load is under way and then sleeps, so the fork lands inside the load
// every time rather than by chance.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "libclient/preload/rdma_libraries.hpp"

using pg_rdma::client::rdma_libraries_problem;

namespace {

constexpr int kLoadSleepMs = 300;   // how long the stand-in's load takes
constexpr unsigned kChildLimitS = 10;  // a child stuck on the lock is killed by then

// The stand-in defines no rdma_* function: a load that went through it ends
// with this in its problem.
bool from_stand_in(const char* problem) { return problem != nullptr && std::strstr(problem, "has no rdma_") != nullptr; }

}  // namespace

TEST_CASE("a fork during another thread's load of the RDMA libraries waits for it, and the child sees its outcome",
          "[rdma_libraries][fork]") {
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    REQUIRE(setenv("SLOW_RDMACM_READY_FD", std::to_string(ready[1]).c_str(), 1) == 0);
    REQUIRE(setenv("SLOW_RDMACM_SLEEP_MS", std::to_string(kLoadSleepMs).c_str(), 1) == 0);

    const char* loader_saw = nullptr;
    std::thread loader([&] { loader_saw = rdma_libraries_problem(); });
    // The stand-in's constructor runs inside the loader's dlopen(), under
    // the load lock: once its byte is here, the load is in progress.
    char byte = 0;
    REQUIRE(read(ready[0], &byte, 1) == 1);

    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        alarm(kChildLimitS);
        _exit(from_stand_in(rdma_libraries_problem()) ? 0 : 3);
    }
    loader.join();
    INFO("the loader's problem: " << (loader_saw != nullptr ? loader_saw : "(none: the real librdmacm was loaded, "
                                                                         "so LD_LIBRARY_PATH missed the stand-in)"));
    REQUIRE(from_stand_in(loader_saw));

    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    INFO("child status " << status << (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM
                                           ? ": it waited for the load lock until its alarm"
                                           : ""));
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    close(ready[0]);
    close(ready[1]);
}
