// No setup step waits for the peer: against a peer that is slow at every
// stage, each step returns in the time its own work takes, and all the
// waiting happens in the caller's poll(). And the blocking wrappers keep
// waiting through signals: EINTR is not a timeout.
#include "testing/catch.hpp"

#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "peer_process.hpp"
#include "tcp_peer.hpp"
#include "transport/tcp_upgrade.hpp"

using namespace pg_rdma::test;
namespace transport = pg_rdma::transport;
namespace protocol = pg_rdma::protocol;
using transport::Mode;
using transport::StepStatus;
using transport::UpgradeOutcome;

namespace {

using Clock = std::chrono::steady_clock;

// How long the slow peer dawdles at each stage.
constexpr auto kPause = 700ms;
// Longest a step may take: its own system calls, the slowest being the
// creation and registration of the verbs resources, on an emulated CPU
// shared with other guests (whose host may stall a vCPU for a good part of
// a second). A step that waited for the peer would take a kPause at least.
constexpr double kStepBudgetMs = static_cast<double>(kPause.count()) / 2;

// The pauses add up to several seconds per upgrade: a deadline well beyond
// them, so that only a step that blocks can fail these tests.
Settings patient() {
    Settings s;
    s.connect_timeout = 30s;
    return s;
}
constexpr std::uint8_t kByte = 42;  // sent over RDMA once set up

// The timed side does the one-time library work first (it is no wait for
// the peer), and says what it cost.
void warm_up(const char* who) {
    std::fprintf(stderr, "%s: warming up the RDMA libraries took %.0f ms\n", who, warm_up_rdma_libraries());
}

void pause_a_while() { usleep(static_cast<useconds_t>(std::chrono::microseconds(kPause).count())); }

// Steps `upgrade` to its end as an event loop would, timing every step.
template <class Upgrade>
transport::UpgradeResult timed_steps(Upgrade& upgrade, std::vector<double>& step_ms, std::string& log) {
    for (;;) {
        const auto before = Clock::now();
        const StepStatus status = upgrade.step();
        step_ms.push_back(ms_between(before, Clock::now()));
        log += std::to_string(static_cast<int>(step_ms.back())) + " ms -> " + transport::to_string(upgrade.stage()) +
               "\n";
        if (status == StepStatus::Done) return upgrade.take_result();
        transport::Error err;
        REQUIRE(transport::wait_for(upgrade.want(), upgrade.deadline(), err));
    }
}

// A client that pauses before every step of its upgrade, so the server
// waits at every stage. Sends kByte once on RDMA; exit status 0 if all went well.
int slow_client(std::uint16_t port) {
    const int fd = tcp_connect(port);
    if (fd < 0) return 90;
    transport::ClientUpgrade upgrade(fd, Mode::Require, patient());
    while (upgrade.step() == StepStatus::InProgress) {
        pause_a_while();
        transport::Error err;
        if (!transport::wait_for(upgrade.want(), upgrade.deadline(), err)) return 91;
    }
    auto result = upgrade.take_result();
    std::fprintf(stderr, "slow client: %s %s\n", transport::to_string(result.outcome), result.error.message.c_str());
    if (result.outcome != UpgradeOutcome::Rdma) return 92;
    return write_all(*result.connection, &kByte, 1) ? 0 : 93;
}

bool got_byte(transport::Connection& conn) {
    std::uint8_t byte = 0;
    return read_exact(conn, &byte, 1) && byte == kByte;
}

// SIGALRM every kSignalInterval without SA_RESTART, for as long as this lives.
std::atomic<int> signals_seen{0};
constexpr auto kSignalInterval = 5ms;

class SignalStorm {
public:
    SignalStorm() {
        struct sigaction sa {};
        sa.sa_handler = [](int) { signals_seen.fetch_add(1, std::memory_order_relaxed); };
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = 0;  // no SA_RESTART: interrupted calls fail with EINTR
        REQUIRE(sigaction(SIGALRM, &sa, &saved_) == 0);
        const auto us = std::chrono::microseconds(kSignalInterval).count();
        itimerval every{{0, us}, {0, us}};
        REQUIRE(setitimer(ITIMER_REAL, &every, nullptr) == 0);
    }
    ~SignalStorm() {
        const itimerval off{};
        setitimer(ITIMER_REAL, &off, nullptr);
        sigaction(SIGALRM, &saved_, nullptr);
    }
    SignalStorm(const SignalStorm&) = delete;
    SignalStorm& operator=(const SignalStorm&) = delete;

private:
    struct sigaction saved_ {};
};

}  // namespace

TEST_CASE("a client upgrade's steps return at once while the server is slow at every stage",
          "[rdma][nonblocking]") {
    TcpListener tcp;
    PeerProcess server([&]() -> int {
        const int fd = tcp.accept_one();
        if (fd < 0 || !read_upgrade_request(fd)) return 90;
        const sockaddr_in at = rdma_address(0);
        transport::Error err;
        auto listener = transport::Listener::create(reinterpret_cast<const sockaddr*>(&at), patient(), err);
        if (!listener) return 91;
        const sockaddr_storage bound = listener->local_address();
        const auto reply = accept_reply(*reinterpret_cast<const sockaddr_in*>(&bound), test_nonce());
        // The reply in three late pieces: the tag, part of it, the rest.
        for (const auto& [from, to] : {std::pair<std::size_t, std::size_t>{0, 1}, {1, 30}, {30, reply.size()}}) {
            pause_a_while();
            if (!send_fully(fd, reply.data() + from, to - from)) return 92;
        }
        pause_a_while();  // and a late accept
        sockaddr_storage peer{};
        socklen_t len = sizeof peer;
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len);
        auto conn = listener->accept(test_nonce(), reinterpret_cast<const sockaddr*>(&peer), err);
        if (!conn) return 93;
        return got_byte(*conn) ? 0 : 94;
    });
    warm_up("client");
    const int fd = tcp_connect(tcp.port);
    REQUIRE(fd >= 0);
    std::vector<double> step_ms;
    std::string log;
    const auto start = Clock::now();
    transport::ClientUpgrade upgrade(fd, Mode::Require, patient());
    auto result = timed_steps(upgrade, step_ms, log);
    const double total = ms_between(start, Clock::now());
    INFO(result.error.message << "\nsteps:\n" << log << "total " << total << " ms");
    REQUIRE(result.outcome == UpgradeOutcome::Rdma);
    REQUIRE(write_all(*result.connection, &kByte, 1));
    CHECK(server.wait() == 0);
    CHECK(*std::max_element(step_ms.begin(), step_ms.end()) < kStepBudgetMs);
    CHECK(total >= 4 * static_cast<double>(kPause.count()));  // the waiting was real, and outside the steps
    std::fprintf(stderr, "client steps:\n%s", log.c_str());
    close(fd);
}

TEST_CASE("a server upgrade's steps return at once while the client is slow at every stage",
          "[rdma][nonblocking]") {
    TcpListener tcp;
    PeerProcess client([&] { return slow_client(tcp.port); });
    warm_up("server");
    const int fd = tcp.accept_one();
    REQUIRE(read_upgrade_request(fd));
    std::vector<double> step_ms;
    std::string log;
    transport::ServerUpgrade upgrade(fd, patient());
    auto result = timed_steps(upgrade, step_ms, log);
    INFO(result.error.message << "\nsteps:\n" << log);
    REQUIRE(result.outcome == UpgradeOutcome::Rdma);
    CHECK(got_byte(*result.connection));
    CHECK(client.wait() == 0);
    CHECK(*std::max_element(step_ms.begin(), step_ms.end()) < kStepBudgetMs);
    CHECK(step_ms.size() >= 3);  // it did wait for the slow client in between
    std::fprintf(stderr, "server steps:\n%s", log.c_str());
    close(fd);
}

TEST_CASE("signals during upgrade_server's waits do not end the upgrade", "[rdma][nonblocking][signal]") {
    TcpListener tcp;
    PeerProcess client([&] { return slow_client(tcp.port); });
    const int fd = tcp.accept_one();
    REQUIRE(read_upgrade_request(fd));
    transport::UpgradeResult result;
    {
        SignalStorm storm;
        result = transport::upgrade_server(fd, patient());
    }
    INFO(result.error.message << "; " << signals_seen.load() << " signals");
    REQUIRE(result.outcome == UpgradeOutcome::Rdma);
    CHECK(signals_seen.load() >= 20);  // the slow client kept it waiting for many signals
    CHECK(got_byte(*result.connection));
    CHECK(client.wait() == 0);
    close(fd);
}

TEST_CASE("signals during upgrade_client's waits do not end the upgrade", "[rdma][nonblocking][signal]") {
    TcpListener tcp;
    PeerProcess server([&]() -> int {
        const int fd = tcp.accept_one();
        if (fd < 0 || !read_upgrade_request(fd)) return 90;
        pause_a_while();  // the client waits for the reply through signals
        auto result = transport::upgrade_server(fd, patient());
        std::fprintf(stderr, "server: %s %s\n", transport::to_string(result.outcome), result.error.message.c_str());
        if (result.outcome != UpgradeOutcome::Rdma) return 91;
        return got_byte(*result.connection) ? 0 : 92;
    });
    const int fd = tcp_connect(tcp.port);
    REQUIRE(fd >= 0);
    transport::UpgradeResult result;
    {
        SignalStorm storm;
        result = transport::upgrade_client(fd, Mode::Require, patient());
    }
    INFO(result.error.message << "; " << signals_seen.load() << " signals");
    REQUIRE(result.outcome == UpgradeOutcome::Rdma);
    CHECK(signals_seen.load() >= 20);
    REQUIRE(write_all(*result.connection, &kByte, 1));
    CHECK(server.wait() == 0);
    close(fd);
}
