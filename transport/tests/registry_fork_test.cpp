// The connection registry's lock across fork(): a child forked while another
// thread held the lock must still be able to take it (its exit handler
// does), or the child hangs forever at exit. No RDMA needed: the exit
// handler takes the lock with or without connections.
#include "testing/catch.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "transport/connection.hpp"

using pg_rdma::transport::Connection;

namespace {

// Waits up to `limit` for `pid`; kills it and returns -1 if it did not end.
int wait_bounded(pid_t pid, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (std::chrono::steady_clock::now() < deadline) {
        if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

}  // namespace

TEST_CASE("a child forked while another thread holds the registry lock can still exit", "[lifecycle]") {
    constexpr int kForks = 200;
    std::atomic<bool> stop{false};
    // Takes and releases the registry lock as fast as it can, so forks land
    // while it is held.
    std::thread hammer([&] {
        while (!stop) Connection::close_all_at_exit();
    });
    int hung = 0, failed = 0;
    for (int i = 0; i < kForks; ++i) {
        const pid_t pid = fork();
        if (pid == 0) {
            Connection::close_all_at_exit();  // what exit() would run
            _exit(0);
        }
        const int rc = wait_bounded(pid, std::chrono::seconds(5));
        if (rc == -1) ++hung;
        else if (rc != 0) ++failed;
    }
    stop = true;
    hammer.join();
    CHECK(hung == 0);
    CHECK(failed == 0);
}
