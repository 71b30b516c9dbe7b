// Abandoning a setup at any step (destroying the object, as a backend told
// to exit or a client's event loop cancelling does) releases everything:
// afterwards the process holds exactly the descriptors and pinned memory it
// held before, and the next setup works.
#include "testing/catch.hpp"

#include <arpa/inet.h>
#include <unistd.h>

#include <string>
#include <type_traits>

#include "peer_process.hpp"
#include "tcp_peer.hpp"
#include "transport/acceptor.hpp"
#include "transport/connector.hpp"
#include "transport/rdma_setup.hpp"
#include "transport/tcp_upgrade.hpp"

using namespace pg_rdma::test;
namespace transport = pg_rdma::transport;
using transport::Mode;
using transport::StepStatus;
using transport::UpgradeOutcome;

namespace {

constexpr int kMaxSteps = 64;  // far more than a whole upgrade takes

// Steps `setup` `steps` times (waiting for its descriptors in between, as
// an event loop would) unless it ends first; true if it ended.
template <class Setup>
bool step_times(Setup& setup, int steps, transport::Error& err) {
    for (int i = 0; i < steps; ++i) {
        if (i > 0) REQUIRE(transport::wait_for(setup.want(), setup.deadline(), err));
        if constexpr (std::is_same_v<Setup, transport::Connector>) {
            if (setup.step(err) != StepStatus::InProgress) return true;
        } else {
            if (setup.step() != StepStatus::InProgress) return true;
        }
    }
    return false;
}

// Abandons an upgrade after 0, 1, 2 ... steps until one runs to the end:
// each time, `open_fd()` gives a fresh TCP connection, the upgrade object
// made on it is destroyed after that many steps, and the process must hold
// exactly `before` again. Then a full upgrade still works.
template <class Upgrade, class OpenFd, class MakeUpgrade, class FullUpgrade>
void abandon_after_each_step(const Held& before, OpenFd open_fd, MakeUpgrade make_upgrade,
                             FullUpgrade full_upgrade) {
    bool finished = false;
    for (int steps = 0; steps < kMaxSteps && !finished; ++steps) {
        const int fd = open_fd();
        std::string where;
        {
            Upgrade upgrade = make_upgrade(fd);
            transport::Error err;
            finished = step_times(upgrade, steps, err);
            where = transport::to_string(upgrade.stage());
            if (finished) CHECK(upgrade.take_result().outcome == UpgradeOutcome::Rdma);
        }
        close(fd);
        INFO("abandoned after " << steps << " steps, " << where);
        CHECK(held_now() == before);
        std::fprintf(stderr, "after %d steps (%s): %s\n", steps, where.c_str(), to_string(held_now()).c_str());
    }
    CHECK(finished);
    CHECK(full_upgrade() == UpgradeOutcome::Rdma);
    CHECK(held_now() == before);
}

}  // namespace

TEST_CASE("a client upgrade abandoned after any number of steps releases everything", "[rdma][abandon]") {
    TcpListener tcp;
    // One server for every attempt; an abandoned attempt ends its upgrade
    // (the client closed the TCP connection) and it serves the next.
    PeerProcess server([&]() -> int {
        for (;;) {
            const int fd = tcp.accept_one();
            if (fd < 0) return 90;
            if (read_upgrade_request(fd)) (void)transport::upgrade_server(fd, Settings{});
            close(fd);
        }
    });
    const auto full_upgrade = [&] {
        const int fd = tcp_connect(tcp.port);
        const UpgradeOutcome outcome = transport::upgrade_client(fd, Mode::Require, Settings{}).outcome;
        close(fd);
        return outcome;
    };
    // librdmacm opens the device once per process, at its first use.
    REQUIRE(full_upgrade() == UpgradeOutcome::Rdma);
    abandon_after_each_step<transport::ClientUpgrade>(
        held_now(),
        [&] {
            const int fd = tcp_connect(tcp.port);
            REQUIRE(fd >= 0);
            return fd;
        },
        [](int fd) { return transport::ClientUpgrade(fd, Mode::Require, Settings{}); }, full_upgrade);
}

TEST_CASE("a server upgrade abandoned after any number of steps releases everything", "[rdma][abandon]") {
    TcpListener tcp;
    // One client for every attempt: it asks again as soon as an attempt
    // ended, however it ended, until the test stops listening.
    PeerProcess client([&]() -> int {
        const int listening = tcp.fd;
        close(listening);  // the test's own socket: connecting fails once the test closes it
        Settings s;
        s.connect_timeout = 5s;
        for (;;) {
            const int fd = tcp_connect(tcp.port);
            if (fd < 0) return 0;
            auto result = transport::upgrade_client(fd, Mode::Prefer, s);
            // A client speaks first: its first bytes are what tells the
            // server the upgrade completed at this end too.
            const std::uint8_t byte = 1;
            if (result.outcome == UpgradeOutcome::Rdma) (void)write_all(*result.connection, &byte, 1, 5s);
            close(fd);
        }
    });
    const auto next_request = [&] {
        const int fd = tcp.accept_one();
        REQUIRE(fd >= 0);
        REQUIRE(read_upgrade_request(fd));
        return fd;
    };
    const auto full_upgrade = [&] {
        const int fd = next_request();
        const UpgradeOutcome outcome = transport::upgrade_server(fd, Settings{}).outcome;
        close(fd);
        return outcome;
    };
    REQUIRE(full_upgrade() == UpgradeOutcome::Rdma);
    abandon_after_each_step<transport::ServerUpgrade>(
        held_now(), next_request, [](int fd) { return transport::ServerUpgrade(fd, Settings{}); }, full_upgrade);
}

TEST_CASE("an RDMA connector abandoned after any number of steps releases everything", "[rdma][abandon]") {
    Pipe port_pipe;
    // One listener for every attempt: each accept ends when its client
    // goes away (or after a while, if the client never got that far).
    PeerProcess server([&]() -> int {
        const sockaddr_in at = rdma_address(0);
        transport::Error err;
        auto listener = transport::Listener::create(reinterpret_cast<const sockaddr*>(&at), Settings{}, err);
        if (!listener) return 90;
        const sockaddr_storage bound = listener->local_address();
        port_pipe.send_u32(ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port));
        for (;;) (void)listener->accept(test_nonce(), nullptr, transport::SetupClock::now() + 5s, err);
    });
    const sockaddr_in dst = rdma_address(static_cast<std::uint16_t>(port_pipe.recv_u32()));
    const auto start = [&](transport::Error& err) {
        return transport::Connector::start(reinterpret_cast<const sockaddr*>(&dst), nullptr, test_nonce(), Settings{},
                                           transport::SetupClock::now() + 10s, err);
    };
    const auto full_connect = [&] {
        transport::Error err;
        auto connector = start(err);
        REQUIRE(connector);
        step_times(*connector, kMaxSteps, err);
        INFO(err.message);
        return connector->take_connection() != nullptr;
    };
    REQUIRE(full_connect());
    const Held before = held_now();
    bool finished = false;
    for (int steps = 0; steps < kMaxSteps && !finished; ++steps) {
        std::string where;
        {
            transport::Error err;
            auto connector = start(err);
            REQUIRE(connector);
            finished = step_times(*connector, steps, err);
            where = transport::to_string(connector->stage());
            if (err.failed()) where += ": " + err.message;
            if (finished) CHECK(connector->take_connection() != nullptr);
        }
        INFO("abandoned after " << steps << " steps, " << where);
        CHECK(held_now() == before);
        std::fprintf(stderr, "after %d steps (%s): %s\n", steps, where.c_str(), to_string(held_now()).c_str());
    }
    CHECK(finished);
    CHECK(full_connect());
    CHECK(held_now() == before);
}

TEST_CASE("an RDMA connector abandoned while its handshake waits for a silent server releases everything",
          "[rdma][abandon]") {
    // The stage that holds the most: endpoint, stream, its epoll set. A
    // server that accepts and then never answers keeps the connector there
    // for certain, whatever the timing of the steps above.
    Pipe port_pipe;
    PeerProcess server([&]() -> int {
        const sockaddr_in at = rdma_address(0);
        transport::Error err;
        auto listener = transport::Listener::create(reinterpret_cast<const sockaddr*>(&at), Settings{}, err);
        if (!listener) return 90;
        const sockaddr_storage bound = listener->local_address();
        port_pipe.send_u32(ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port));
        auto acceptor =
            transport::Acceptor::start(*listener, test_nonce(), nullptr, transport::SetupClock::now() + 30s, err);
        // Stop stepping once rdma_accept is out: a step that saw
        // ESTABLISHED would go straight on to answer an offer that had
        // already arrived, and the client would finish its handshake.
        while (acceptor->stage() == transport::Acceptor::Stage::AwaitingRequest) {
            if (acceptor->step(err) != StepStatus::InProgress) return 91;
            if (acceptor->stage() != transport::Acceptor::Stage::AwaitingRequest) break;
            if (!transport::wait_for(acceptor->want(), acceptor->deadline(), err)) return 92;
        }
        if (acceptor->stage() != transport::Acceptor::Stage::Accepting) return 93;
        sleep(60);  // silent from here on; killed when the test ends
        return 0;
    });
    const sockaddr_in dst = rdma_address(static_cast<std::uint16_t>(port_pipe.recv_u32()));
    warm_up_rdma_libraries();
    const Held before = held_now();
    {
        transport::Error err;
        auto connector = transport::Connector::start(reinterpret_cast<const sockaddr*>(&dst), nullptr, test_nonce(),
                                                     Settings{}, transport::SetupClock::now() + 30s, err);
        REQUIRE(connector);
        while (connector->stage() != transport::Connector::Stage::Handshaking) {
            INFO(err.message);
            REQUIRE(connector->step(err) == StepStatus::InProgress);
            REQUIRE(transport::wait_for(connector->want(), connector->deadline(), err));
        }
        CHECK(held_now().descriptors > before.descriptors);
        CHECK(held_now().pinned > before.pinned);
    }
    CHECK(held_now() == before);
}
