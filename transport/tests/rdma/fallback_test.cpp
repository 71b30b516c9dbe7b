// Prefer and Require when RDMA is not possible, over a real TCP connection
// and the real rxe device, both ends using the upgrade exchange.
#include "testing/catch.hpp"

#include <arpa/inet.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "peer_process.hpp"
#include "tcp_peer.hpp"
#include "protocol/upgrade.hpp"
#include "transport/rdma_setup.hpp"
#include "transport/tcp_upgrade.hpp"

using namespace pg_rdma::test;
namespace transport = pg_rdma::transport;
namespace protocol = pg_rdma::protocol;
using transport::Mode;
using transport::UpgradeOutcome;

namespace {

constexpr char kHello[] = "hello over tcp";  // what a client says after falling back

// Exit codes the client child reports its outcome with.
int code_of(UpgradeOutcome o) { return 10 + static_cast<int>(o); }

// Client body: connect over TCP, let `prepare` spoil something, ask for an
// upgrade in `mode`; on TcpSame, prove the connection is still clean by
// sending kHello. Writes the error message to stderr for the log.
template <class Prepare>
int run_client(std::uint16_t port, Mode mode, Prepare prepare, const char* must_mention) {
    const int fd = tcp_connect(port);
    if (fd < 0) return 90;
    prepare();
    auto result = transport::upgrade_client(fd, mode, Settings{});
    std::fprintf(stderr, "client: %s: %s\n", transport::to_string(result.outcome), result.error.message.c_str());
    if (result.outcome != UpgradeOutcome::Rdma && result.error.message.find(must_mention) == std::string::npos)
        return 91;  // the message must tell the user what went wrong
    if (result.outcome == UpgradeOutcome::TcpSame && send(fd, kHello, sizeof kHello, 0) != sizeof kHello) return 92;
    if (result.outcome == UpgradeOutcome::Rdma) {
        std::uint8_t byte = 42;
        if (!write_all(*result.connection, &byte, 1)) return 93;
    }
    close(fd);
    return code_of(result.outcome);
}

// Server body: accept, and either serve the upgrade or see plain TCP bytes.
// Returns what the session continued on; checks the client's kHello.
UpgradeOutcome run_server(const TcpListener& tcp) {
    const int fd = tcp.accept_one();
    REQUIRE(fd >= 0);
    std::uint8_t first[8];
    REQUIRE(read_fully(fd, first, sizeof first));
    UpgradeOutcome outcome = UpgradeOutcome::TcpSame;
    std::size_t hello_read = sizeof first;  // the client skipped the upgrade
    const auto first_packet = protocol::classify_first_packet(first);
    if (first_packet.is_ok() && first_packet.value == protocol::FirstPacket::Upgrade) {
        auto result = transport::upgrade_server(fd, Settings{});
        outcome = result.outcome;
        hello_read = 0;
        if (outcome == UpgradeOutcome::Rdma) {
            std::uint8_t byte = 0;
            CHECK(read_exact(*result.connection, &byte, 1));
            CHECK(byte == 42);
        }
    }
    if (outcome == UpgradeOutcome::TcpSame) {
        char hello[sizeof kHello] = {};
        std::memcpy(hello, first, std::min(hello_read, sizeof hello));
        if (hello_read < sizeof hello) {
            const bool got = read_fully(fd, hello + hello_read, sizeof hello - hello_read);
            if (!got) outcome = UpgradeOutcome::Failed;  // the client hung up (Require)
        }
        if (outcome == UpgradeOutcome::TcpSame) CHECK(std::string(hello) == kHello);
    }
    close(fd);
    return outcome;
}

void no_change() {}

}  // namespace

TEST_CASE("both ends able to do RDMA upgrade the session", "[rdma][fallback]") {
    TcpListener tcp;
    PeerProcess client([&] { return run_client(tcp.port, Mode::Require, no_change, ""); });
    CHECK(run_server(tcp) == UpgradeOutcome::Rdma);
    CHECK(client.wait() == code_of(UpgradeOutcome::Rdma));
}

TEST_CASE("a client without an RDMA device stays on TCP with prefer and fails with require",
          "[rdma][fallback]") {
    // The guest runs rdma in exclusive netns mode: a new network namespace
    // sees no RDMA device at all, while the TCP socket made before keeps working.
    const auto hide_devices = [] {
        if (unshare(CLONE_NEWNET) != 0) std::exit(80);
    };
    TcpListener tcp;
    {
        PeerProcess client([&] { return run_client(tcp.port, Mode::Prefer, hide_devices, "no RDMA device"); });
        CHECK(run_server(tcp) == UpgradeOutcome::TcpSame);  // and the first bytes were the client's own
        CHECK(client.wait() == code_of(UpgradeOutcome::TcpSame));
    }
    {
        PeerProcess client([&] { return run_client(tcp.port, Mode::Require, hide_devices, "no RDMA device"); });
        const int fd = tcp.accept_one();
        std::uint8_t byte = 0;
        CHECK(recv(fd, &byte, 1, 0) == 0);  // nothing sent, connection closed
        close(fd);
        CHECK(client.wait() == code_of(UpgradeOutcome::Failed));
    }
}

TEST_CASE("a client whose memlock limit is too low stays on TCP with prefer and fails with require",
          "[rdma][fallback]") {
    const auto shrink_memlock = [] {
        const rlimit tiny{64 * 1024, 64 * 1024};
        if (setrlimit(RLIMIT_MEMLOCK, &tiny) != 0) std::exit(80);
    };
    TcpListener tcp;
    {
        PeerProcess client([&] { return run_client(tcp.port, Mode::Prefer, shrink_memlock, "LimitMEMLOCK"); });
        CHECK(run_server(tcp) == UpgradeOutcome::TcpSame);
        CHECK(client.wait() == code_of(UpgradeOutcome::TcpSame));
    }
    {
        PeerProcess client([&] { return run_client(tcp.port, Mode::Require, shrink_memlock, "ulimit -l"); });
        const int fd = tcp.accept_one();
        std::uint8_t byte = 0;
        CHECK(recv(fd, &byte, 1, 0) == 0);
        close(fd);
        CHECK(client.wait() == code_of(UpgradeOutcome::Failed));
    }
}

TEST_CASE("a server whose memlock limit is too low declines and the client follows its mode",
          "[rdma][fallback]") {
    const rlimit tiny{64 * 1024, 64 * 1024};
    TcpListener tcp;
    {
        PeerProcess client([&] { return run_client(tcp.port, Mode::Prefer, no_change, "declined"); });
        rlimit saved{};
        getrlimit(RLIMIT_MEMLOCK, &saved);
        REQUIRE(setrlimit(RLIMIT_MEMLOCK, &tiny) == 0);
        CHECK(run_server(tcp) == UpgradeOutcome::TcpSame);
        setrlimit(RLIMIT_MEMLOCK, &saved);
        CHECK(client.wait() == code_of(UpgradeOutcome::TcpSame));
    }
    {
        PeerProcess client([&] { return run_client(tcp.port, Mode::Require, no_change, "declined"); });
        rlimit saved{};
        getrlimit(RLIMIT_MEMLOCK, &saved);
        REQUIRE(setrlimit(RLIMIT_MEMLOCK, &tiny) == 0);
        CHECK(run_server(tcp) == UpgradeOutcome::Failed);  // the client hung up after 'N'
        setrlimit(RLIMIT_MEMLOCK, &saved);
        CHECK(client.wait() == code_of(UpgradeOutcome::Failed));
    }
}

TEST_CASE("an RDMA address without a route fails connect with a message naming the call", "[rdma][fallback]") {
    // The guest has no route beyond its rxe subnet 10.99.0.0/24 (no default
    // route), so resolving 10.98.0.1 fails at once and sends nothing.
    sockaddr_in nowhere = rdma_address(4791);
    inet_pton(AF_INET, "10.98.0.1", &nowhere.sin_addr);
    Settings s;
    s.connect_timeout = 3000ms;
    transport::Error err;
    auto conn = transport::connect(reinterpret_cast<const sockaddr*>(&nowhere), test_nonce(), s, err);
    CHECK_FALSE(conn);
    INFO(err.message);
    CHECK((err.code == ENETUNREACH || err.code == EHOSTUNREACH));
    CHECK_THAT(err.message, testing::contains_text("rdma_resolve_addr(10.98.0.1:4791)"));
}

TEST_CASE("a client that gives up on RDMA after the server accepted continues on the same TCP connection",
          "[rdma][fallback]") {
    TcpListener tcp;
    PeerProcess client([&]() -> int {
        const int fd = tcp_connect(tcp.port);
        const auto request = protocol::encode_upgrade_request();
        std::uint8_t reply[protocol::kUpgradeAcceptSize];
        if (send(fd, request.data(), request.size(), 0) != 8 || !read_fully(fd, reply, sizeof reply)) return 90;
        // As a client does when its RDMA connect fails: talk TCP instead.
        return send(fd, kHello, sizeof kHello, 0) == sizeof kHello ? 0 : 91;
    });
    CHECK(run_server(tcp) == UpgradeOutcome::TcpSame);
    CHECK(client.wait() == 0);
}

// The split outcome: the client's deadline passes just as its side
// completes, after the server's has. The client decides; the server
// follows whichever way its first bytes come.
TEST_CASE("a client that completes RDMA but lets it go and talks on TCP leaves the server on TCP with its bytes",
          "[rdma][fallback]") {
    for (const bool close_first : {true, false}) {
        INFO((close_first ? "the RDMA connection closed before the TCP bytes" : "the TCP bytes first"));
        TcpListener tcp;
        PeerProcess client([&]() -> int {
            const int fd = tcp_connect(tcp.port);
            if (fd < 0) return 90;
            auto result = transport::upgrade_client(fd, Mode::Require, Settings{});
            if (result.outcome != UpgradeOutcome::Rdma) return 91;
            if (close_first) result.connection.reset();
            if (send(fd, kHello, sizeof kHello, 0) != sizeof kHello) return 92;
            result.connection.reset();
            char wait_for_close = 0;
            (void)!read(fd, &wait_for_close, 1);  // the server closes when it has read
            return 0;
        });
        CHECK(run_server(tcp) == UpgradeOutcome::TcpSame);  // and it read kHello on TCP
        CHECK(client.wait() == 0);
    }
}

TEST_CASE("a process forked after its parent used RDMA upgrades all the same, with prefer and with require",
          "[rdma][fallback][fork]") {
    // The parent's use: an id with its route resolved to the device, so
    // librdmacm has opened it in the parent (as a client's does; this test
    // process itself may have used RDMA by then, in which case its forked
    // "parent" could not listen). The child it forks then asks for RDMA,
    // which it sets up on a device context of its own
    // (transport/endpoint.hpp).
    const auto forked_after_use = [](std::uint16_t port, Mode mode) {
        return [port, mode]() -> int {
            ResolvedId used;
            std::string why;
            if (!resolve_route_to(1, used, why)) {
                // Still connect, so that the parent's accept returns and its checks fail.
                std::fprintf(stderr, "parent's use of RDMA: %s\n", why.c_str());
                close(tcp_connect(port));
                return 81;
            }
            PeerProcess child([&] { return run_client(port, mode, no_change, ""); });
            return child.wait();
        };
    };
    for (const Mode mode : {Mode::Prefer, Mode::Require}) {
        TcpListener tcp;
        PeerProcess client(forked_after_use(tcp.port, mode));
        CHECK(run_server(tcp) == UpgradeOutcome::Rdma);  // and the child's byte came over it
        CHECK(client.wait() == code_of(UpgradeOutcome::Rdma));
    }
}
