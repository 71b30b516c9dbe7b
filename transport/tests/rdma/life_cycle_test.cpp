// A connection's life cycle in the homes it gets: a forked child that drops
// what it inherited, a signal handler that writes (PostgreSQL's quickdie),
// another thread inside a call while the process exits.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "idle_peer.hpp"
#include "transport/event_set.hpp"
#include "with_peer.hpp"

using namespace pg_rdma::test;
namespace transport = pg_rdma::transport;

namespace {

constexpr std::uint32_t kSeed = 0x9191;

// Forks a child that runs `body`, then exits through exit() (so the exit
// handlers run, as in any program); returns the child's exit status.
template <class Body>
int in_forked_child(Body body) {
    const pid_t pid = fork();
    if (pid == 0) std::exit(body());
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("a forked child that destroys an inherited connection leaves the parent's working",
          "[rdma][lifecycle]") {
    // pg_dump forks workers, psql forks for \!: the child inherits the
    // Connection object. Destroying it there (and exiting, which runs the
    // exit drain) must neither touch the parent's queue pair nor read freed
    // memory (this binary's transport is built with ASan in this test).
    Pipe go;
    const auto peer = [&](Connection& conn) -> int {
        go.recv_u32();
        std::string why;
        return exchange(conn, 256 * 1024, kSeed + 1, 256 * 1024, kSeed, why) && read_eof(conn) ? 0 : 1;
    };
    with_peer(Settings{}, peer, [&](Connection& parent_conn, PeerProcess&) {
        const int status = in_forked_child([&]() -> int {
            std::uint8_t byte = 0;
            if (parent_conn.read(&byte, 1) != -1 || errno != EBADF) return 10;  // not the child's to use
            if (parent_conn.fd() != -1) return 11;
            return 0;  // exit(): the exit drain runs here and must leave it alone
        });
        CHECK(status == 0);
        go.send_u32(1);
        std::string why;
        CHECK(exchange(parent_conn, 256 * 1024, kSeed, 256 * 1024, kSeed + 1, why));
        INFO(why);
        CHECK(parent_conn.close() == 0);
    });
}

TEST_CASE("a forked child that deletes an inherited heap connection does not corrupt the exit drain",
          "[rdma][lifecycle]") {
    Pipe port_pipe, go;
    PeerProcess peer([&]() -> int {
        std::string error;
        auto conn = connect_to_parent(port_pipe, Settings{}, error);
        if (!conn) return 90;
        go.recv_u32();
        std::string why;
        return exchange(*conn, 64 * 1024, kSeed + 1, 64 * 1024, kSeed, why) && read_eof(*conn) ? 0 : 1;
    });
    Rendezvous rendezvous(port_pipe, Settings{});
    std::unique_ptr<Connection> conn = rendezvous.accept();
    const int status = in_forked_child([&]() -> int {
        conn.reset();  // frees the object in the child; the registry must forget it
        return 0;      // exit(): the exit drain walks the registry
    });
    CHECK(status == 0);  // under ASan a use-after-free ends the child with an error
    go.send_u32(1);
    std::string why;
    CHECK(exchange(*conn, 64 * 1024, kSeed, 64 * 1024, kSeed + 1, why));
    INFO(why);
    CHECK(conn->close() == 0);
    CHECK(peer.wait() == 0);
}

namespace {

Connection* g_signal_conn = nullptr;
std::atomic<int> g_signal_write_rc{0};
std::atomic<int> g_signal_write_errno{0};

void write_from_signal_handler(int) {
    const int saved = errno;
    const ssize_t n = g_signal_conn->write("quickdie", 8);
    g_signal_write_rc = static_cast<int>(n);
    g_signal_write_errno = n < 0 ? errno : 0;
    errno = saved;
}

}  // namespace

TEST_CASE("a write from a signal handler that interrupted a call fails cleanly instead of re-entering",
          "[rdma][lifecycle]") {
    Pipe done;
    const auto peer = [&](Connection& conn) -> int {
        std::uint8_t buf[8];
        // Only the handler's second write (outside any call) arrives.
        if (!read_exact(conn, buf, sizeof buf) || std::memcmp(buf, "quickdie", 8) != 0) return 1;
        done.recv_u32();
        return read_eof(conn) ? 0 : 2;
    };
    with_peer(Settings{}, peer, [&](Connection& conn, PeerProcess&) {
        g_signal_conn = &conn;
        struct sigaction sa {};
        sa.sa_handler = write_from_signal_handler;  // no SA_RESTART: wait() sees EINTR
        sigaction(SIGUSR1, &sa, nullptr);
        const pthread_t self = pthread_self();
        std::thread kicker([self] {
            std::this_thread::sleep_for(300ms);
            pthread_kill(self, SIGUSR1);
        });
        // The signal lands while this thread is inside wait(): the handler's
        // write must not run the data path underneath it.
        const int rc = conn.wait(POLLIN, 5000);
        kicker.join();
        CHECK(rc == -1);
        CHECK(errno == EINTR);
        CHECK(g_signal_write_rc == -1);
        CHECK(g_signal_write_errno == EIO);
        // Outside any call the same handler's write goes through.
        raise(SIGUSR1);
        CHECK(g_signal_write_rc == 8);
        done.send_u32(1);
        CHECK(conn.close() == 0);
        signal(SIGUSR1, SIG_DFL);
    });
}

TEST_CASE("the exit drain skips a connection another thread is inside", "[rdma][lifecycle]") {
    Pipe done;
    const auto peer = [&](Connection& conn) -> int {
        done.recv_u32();
        std::uint8_t byte = 7;
        if (!write_all(conn, &byte, 1)) return 1;
        return read_eof(conn) ? 0 : 2;
    };
    with_peer(Settings{}, peer, [&](Connection& conn, PeerProcess&) {
        std::atomic<int> waited{-2};
        std::thread waiter([&] { waited = conn.wait(POLLIN, 10'000); });
        std::this_thread::sleep_for(300ms);  // the thread is inside wait() now
        const auto start = std::chrono::steady_clock::now();
        Connection::close_all_at_exit();  // must neither block on it nor close it under it
        CHECK(seconds_since(start) < 1.0);
        done.send_u32(1);
        waiter.join();
        CHECK((waited & POLLIN) != 0);  // the wait went on and saw the peer's byte
        std::uint8_t byte = 0;
        CHECK(conn.read(&byte, 1) == 1);
        CHECK(conn.close() == 0);
    });
}

namespace {

int highest_open_fd() {
    int highest = -1;
    for (int fd = 0; fd < 4096; ++fd)
        if (fcntl(fd, F_GETFD) != -1) highest = fd;
    return highest;
}

}  // namespace

TEST_CASE("a connection that cannot get its descriptors fails setup with a message naming the limit",
          "[rdma][lifecycle]") {
    // pgbench -c 200 in one process, say: each connection needs
    // kDescriptorsPerConnection descriptors besides its socket. Whichever of
    // them runs out, setup must fail cleanly and say what to raise.
    Pipe port_pipe;
    PeerProcess peer([&]() -> int {
        const auto port = static_cast<std::uint16_t>(port_pipe.recv_u32());
        int refused = 0;
        for (int spare = 0; spare <= pg_rdma::transport::kDescriptorsPerConnection + 8; ++spare) {
            rlimit lim{};
            getrlimit(RLIMIT_NOFILE, &lim);
            lim.rlim_cur = static_cast<rlim_t>(highest_open_fd() + 1 + spare);
            setrlimit(RLIMIT_NOFILE, &lim);
            Settings quick;
            quick.connect_timeout = 3s;
            std::string error;
            auto conn = connect_to_parent(port, quick, error);
            if (conn) break;  // enough descriptors now (the parent refuses it: wrong listener use)
            std::fprintf(stderr, "spare %d: %s\n", spare, error.c_str());
            if (error.find("ulimit -n") == std::string::npos) return 1;
            ++refused;
        }
        return refused > 0 ? 0 : 2;
    });
    Rendezvous rendezvous(port_pipe, Settings{});
    // Accept what finally gets through so the peer's last attempt completes.
    transport::Error err;
    auto conn = rendezvous.listener().accept(test_nonce(), nullptr, err);
    CHECK(peer.wait() == 0);
}
