// What a fork does to a connection (connection.hpp, "Fork";
// fork_handover.hpp), on the host over the in-memory Link: who may claim
// it, that other threads are never disturbed by a fork, and that nothing is
// left behind. The bytes of a taken-over session cross real verbs in the
// guest test (tests/rdma/life_cycle_test.cpp).
#include "testing/catch.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fake_link.hpp"
#include "transport/connection.hpp"
#include "transport/directory.hpp"

using namespace pg_rdma::test;
using pg_rdma::transport::Connection;
using namespace std::chrono_literals;

namespace {

int threads() { return pg_rdma::transport::count_entries("/proc/self/task"); }
int descriptors() { return pg_rdma::transport::count_entries("/proc/self/fd"); }

// Waits up to `limit` for `pid`; its exit status, or -1 if it had to be killed.
int wait_child(pid_t pid, std::chrono::seconds limit = 20s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (std::chrono::steady_clock::now() < deadline) {
        if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
        std::this_thread::sleep_for(1ms);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

// Polls `done` for up to `limit`: the watcher settles offers in its thread.
template <class Done>
bool eventually(Done done, std::chrono::seconds limit = 5s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(5ms);
    }
    return true;
}

bool still_ours(Connection& conn) {
    std::uint8_t byte = 0;
    return conn.read(&byte, 1) == -1 && errno == EAGAIN;
}

}  // namespace

TEST_CASE("a fork never makes another thread's call on a connection fail", "[fork]") {
    // A threaded client whose main thread runs programs (fork, exec) while
    // another thread is reading: before, the offer held the connection
    // across the fork and that thread's calls failed with EIO.
    auto s = establish();
    Connection conn(std::move(s->a));
    std::atomic<bool> stop{false};
    std::atomic<long> calls{0}, failures{0};
    std::thread reader([&] {
        std::uint8_t byte = 0;
        while (!stop) {
            ++calls;
            if (conn.read(&byte, 1) < 0 && errno != EAGAIN) ++failures;
            std::this_thread::yield();  // one core for the forks too
        }
    });
    for (int i = 0; i < 100; ++i) {
        const pid_t pid = fork();
        if (pid == 0) {
            execl("/bin/true", "true", static_cast<char*>(nullptr));
            _exit(127);
        }
        REQUIRE(wait_child(pid) == 0);
    }
    stop = true;
    reader.join();
    CHECK(calls > 0);
    CHECK(failures == 0);
}

TEST_CASE("a parent that uses its connection after the fork keeps it, and the child is refused", "[fork]") {
    auto s = establish();
    Connection conn(std::move(s->a));
    int go[2];
    REQUIRE(pipe(go) == 0);
    const pid_t pid = fork();
    if (pid == 0) {
        char byte = 0;
        if (read(go[0], &byte, 1) != 1) _exit(10);
        if (conn.adopt_in_child() != -1 || errno != EBADF) _exit(11);
        _exit(0);
    }
    CHECK(still_ours(conn));  // the parent's first call keeps it
    REQUIRE(write(go[1], "x", 1) == 1);
    CHECK(wait_child(pid) == 0);
    CHECK(still_ours(conn));
    close(go[0]);
    close(go[1]);
}

TEST_CASE("a grandchild cannot claim a connection through its parent's offer", "[fork]") {
    // The child never used the connection, so its own offer is open; the
    // grandchild inherits that end but must not use it.
    auto s = establish();
    Connection conn(std::move(s->a));
    const pid_t child = fork();
    if (child == 0) {
        const pid_t grandchild = fork();
        if (grandchild == 0) _exit(conn.adopt_in_child() == -1 && errno == EBADF ? 0 : 20);
        int status = 0;
        waitpid(grandchild, &status, 0);
        _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 21);
    }
    CHECK(wait_child(child) == 0);
    CHECK(still_ours(conn));
}

TEST_CASE("a later fork does not offer again a connection whose offer is open", "[fork]") {
    auto s = establish();
    Connection conn(std::move(s->a));
    int go[2];
    REQUIRE(pipe(go) == 0);
    const pid_t first = fork();
    if (first == 0) {  // waits, then leaves without claiming
        char byte = 0;
        _exit(read(go[0], &byte, 1) == 1 ? 0 : 30);
    }
    const pid_t second = fork();
    if (second == 0) _exit(conn.adopt_in_child() == -1 && errno == EBADF ? 0 : 31);
    CHECK(wait_child(second) == 0);
    REQUIRE(write(go[1], "x", 1) == 1);
    CHECK(wait_child(first) == 0);
    CHECK(still_ours(conn));
    close(go[0]);
    close(go[1]);
}

TEST_CASE("children that exit, exec or linger leave no thread or descriptor behind", "[fork]") {
    auto s = establish();
    Connection conn(std::move(s->a));
    // The baseline after one fork has come and gone: the first fork with an
    // offer makes the watcher's wake-up eventfd, which lives on.
    const pid_t first = fork();
    if (first == 0) _exit(0);
    REQUIRE(wait_child(first) == 0);
    REQUIRE(eventually([] { return threads() == 1; }));  // no watcher left
    const int threads_before = threads(), fds_before = descriptors();
    // Lingering children: the parent keeps the connection at once, so their
    // offers close while they still run.
    std::vector<pid_t> lingering;
    for (int i = 0; i < 10; ++i) {
        const pid_t pid = fork();
        if (pid == 0) {
            pause();
            _exit(0);
        }
        lingering.push_back(pid);
        CHECK(still_ours(conn));
    }
    const bool settled = eventually([&] { return threads() == threads_before && descriptors() == fds_before; });
    INFO("with 10 lingering children: threads " << threads() << " (was " << threads_before << "), descriptors "
                                               << descriptors() << " (was " << fds_before << ")");
    CHECK(settled);
    for (const pid_t pid : lingering) kill(pid, SIGKILL);
    for (const pid_t pid : lingering) waitpid(pid, nullptr, 0);
    // Children that exec or exit without a word, the parent idle meanwhile.
    for (int i = 0; i < 10; ++i) {
        const pid_t pid = fork();
        if (pid == 0) {
            if (i % 2 == 0) execl("/bin/true", "true", static_cast<char*>(nullptr));
            _exit(0);
        }
        REQUIRE(wait_child(pid) == 0);
    }
    const bool back = eventually([&] { return threads() == threads_before && descriptors() == fds_before; });
    INFO("after the children: threads " << threads() << " (was " << threads_before << "), descriptors "
                                        << descriptors() << " (was " << fds_before << ")");
    CHECK(back);
    CHECK(still_ours(conn));
}

namespace {

// This process's eventfd descriptors.
std::set<int> eventfds() {
    std::set<int> found;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        const auto target = std::filesystem::read_symlink(entry.path(), ec);
        if (!ec && target.string() == "anon_inode:[eventfd]") found.insert(std::stoi(entry.path().filename().string()));
    }
    return found;
}

// CPU time (clock ticks, user + system) of every thread but the main one.
long other_threads_ticks() {
    long ticks = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
        if (entry.path().filename().string() == std::to_string(getpid())) continue;
        std::ifstream stat(entry.path() / "stat");
        std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
        const auto close = text.rfind(')');
        if (close == std::string::npos) continue;
        std::istringstream fields(text.substr(close + 2));
        std::string field;
        long utime = 0, stime = 0;
        for (int i = 3; fields >> field; ++i) {  // field 3 is the state
            if (i == 14) utime = std::stol(field);
            if (i == 15) {
                stime = std::stol(field);
                break;
            }
        }
        ticks += utime + stime;
    }
    return ticks;
}

}  // namespace

TEST_CASE("a program that closes the watcher's wake-up descriptor does not make it spin", "[fork]") {
    // A closefrom() in the parent, as daemons do, closes the watcher's
    // eventfd behind it: polled again, that number says POLLNVAL at once,
    // for ever. Two lingering children, one offer each, so that the
    // watcher polls again after the first one's offer is settled.
    // The watcher's eventfd is the one there before any connection (an
    // earlier case's fork made it), or the one the first fork made.
    std::set<int> watchers = eventfds();
    auto s1 = establish();
    auto s2 = establish();
    Connection first(std::move(s1->a));
    const std::set<int> before_fork = eventfds();
    const pid_t child1 = fork();  // offers `first`; lingers, never claims
    if (child1 == 0) {
        pause();
        _exit(0);
    }
    for (const int fd : eventfds())
        if (before_fork.count(fd) == 0) watchers.insert(fd);
    Connection second(std::move(s2->a));
    const pid_t child2 = fork();  // offers `second` (first's offer is still open)
    if (child2 == 0) {
        pause();
        _exit(0);
    }
    REQUIRE(eventually([] { return threads() == 2; }));  // the watcher serves both offers
    int closed = 0;
    for (const int fd : eventfds()) {
        if (watchers.count(fd) == 0) continue;
        ::close(fd);
        ++closed;
    }
    REQUIRE(closed == 1);
    // The first child goes: its offer is settled, the other still open.
    kill(child1, SIGKILL);
    waitpid(child1, nullptr, 0);
    const long ticks_before = other_threads_ticks();
    std::this_thread::sleep_for(1s);
    const long spent = other_threads_ticks() - ticks_before;
    INFO("the watcher spent " << spent << " ticks of " << sysconf(_SC_CLK_TCK) << " in the second after");
    CHECK(spent < sysconf(_SC_CLK_TCK) / 4);
    // The second child's end closing still settles its offer, and the
    // parent keeps both connections.
    kill(child2, SIGKILL);
    waitpid(child2, nullptr, 0);
    CHECK(eventually([] { return threads() == 1; }));
    CHECK(still_ours(first));
    CHECK(still_ours(second));
}
