// rdma_libraries.cpp's fork guard: a fork() while another thread is loading
// the RDMA libraries waits for the load, so the child never inherits the
// load lock held by a thread it does not have (it would wait for it for
// ever on its first verbs call), and the guard lets go of the lock on both
// sides afterwards. Run with LD_LIBRARY_PATH at the stand-in librdmacm.so.1
// of slow_rdmacm/ (meson.build), whose constructor says when the load is
// under way and then sleeps, so the fork lands inside the load; a check
// below proves it did, rather than trusting the timing.
#include "testing/catch.hpp"

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "libclient/preload/rdma_libraries.hpp"

using pg_rdma::client::rdma_libraries_problem;

namespace {

constexpr int kLoadSleepMs = 3000;     // how long the stand-in's load takes: the fork must begin within it, on a loaded host too
constexpr unsigned kChildLimitS = 10;  // a child stuck on the lock is killed by then
constexpr unsigned kTestLimitS = 30;   // and this process, if its own fork hangs on it
constexpr char kLoading = 'L';         // the stand-in's constructor runs
constexpr char kLoaded = 'D';          // rdma_libraries_problem() returned

// The stand-in defines no rdma_* function: a load that went through it ends
// with this in its problem (after every ibv_* function was found in the
// real libibverbs, which the build needs anyway).
bool from_stand_in(const char* problem) { return problem != nullptr && std::strstr(problem, "has no rdma_") != nullptr; }

// Set by the loader once its load returned; read by this test's own fork
// handler, which runs before the guard's (prepare handlers run in the
// reverse order of their registration, and the guard's was registered
// when the library was loaded): so it tells whether the fork began inside
// the load.
std::atomic<bool> g_loader_done{false};
std::atomic<bool> g_done_when_fork_began{false};
void note_fork_start() { g_done_when_fork_began.store(g_loader_done.load()); }

// Forks a child that exits 0 if it sees the stand-in's outcome, killed by
// its alarm if it waits for the load lock instead; the fork itself takes
// the guard's lock again. The child's pid, or -1.
pid_t fork_checker() {
    const pid_t pid = fork();
    if (pid == 0) {
        alarm(kChildLimitS);
        _exit(from_stand_in(rdma_libraries_problem()) ? 0 : 3);
    }
    return pid;
}

bool exited_cleanly(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

// In a child forked during the load: 0 if the libraries' state shows the
// stand-in's outcome and a further fork neither hangs nor leaves its own
// child unable to answer.
int child_checks() {
    alarm(kChildLimitS);
    if (!from_stand_in(rdma_libraries_problem())) return 3;
    const pid_t grandchild = fork_checker();
    if (grandchild < 0) return 4;
    int status = 0;
    if (waitpid(grandchild, &status, 0) != grandchild) return 5;
    return exited_cleanly(status) ? 0 : 6;
}

std::string describe(int status) {
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) return "killed by its alarm: it waited for the load lock";
    if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
    return "exit status " + std::to_string(WEXITSTATUS(status));
}

// Joins the loader however the test case leaves, so a failed REQUIRE ends
// the case instead of std::terminate.
struct Joining {
    std::thread& thread;
    ~Joining() {
        if (thread.joinable()) thread.join();
    }
};

}  // namespace

TEST_CASE("a fork during another thread's load of the RDMA libraries waits for it, and the child sees its outcome",
          "[rdma_libraries][fork]") {
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    REQUIRE(setenv("SLOW_RDMACM_READY_FD", std::to_string(ready[1]).c_str(), 1) == 0);
    REQUIRE(setenv("SLOW_RDMACM_SLEEP_MS", std::to_string(kLoadSleepMs).c_str(), 1) == 0);
    REQUIRE(pthread_atfork(&note_fork_start, nullptr, nullptr) == 0);
    alarm(kTestLimitS);

    const char* loader_saw = nullptr;
    std::thread loader([&] {
        loader_saw = rdma_libraries_problem();
        g_loader_done.store(true);
        (void)!write(ready[1], &kLoaded, 1);
    });
    const Joining joining{loader};
    // The stand-in's constructor runs inside the loader's dlopen(), under
    // the load lock: when its byte comes first, the load is in progress.
    // The loader's own byte first means the stand-in was not loaded.
    char first = 0;
    REQUIRE(read(ready[0], &first, 1) == 1);
    INFO("the first byte on the pipe: " << first << " (" << kLoading << ": the stand-in's load began)");
    REQUIRE(first == kLoading);

    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) _exit(child_checks());

    loader.join();
    INFO("the loader's problem: " << (loader_saw != nullptr ? loader_saw : "(none: the real librdmacm was loaded, "
                                                                         "so LD_LIBRARY_PATH missed the stand-in)"));
    REQUIRE(from_stand_in(loader_saw));
    // Otherwise the load had ended before the fork began, and the fork
    // tested nothing: the stand-in's sleep was too short for this machine.
    CHECK_FALSE(g_done_when_fork_began.load());

    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    INFO("the child: " << describe(status));
    CHECK(exited_cleanly(status));

    // The parent's side of the guard let go of the lock too: otherwise
    // this fork's own prepare handler would wait for it until the alarm.
    const pid_t later = fork_checker();
    REQUIRE(later >= 0);
    int later_status = 0;
    REQUIRE(waitpid(later, &later_status, 0) == later);
    INFO("a child forked after the load: " << describe(later_status));
    CHECK(exited_cleanly(later_status));
    alarm(0);
    close(ready[0]);
    close(ready[1]);
}
