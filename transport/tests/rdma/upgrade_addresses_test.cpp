// Which addresses the RDMA connection of an upgraded session uses: the
// client connects from its TCP connection's local address (the server
// accepts RDMA only from its TCP peer), and it follows a reply to another
// address than its TCP peer only when allowed to.
//
// The guest's rxe netdev gets a second address for these tests, so this
// one host has two RDMA addresses to tell apart.
#include "testing/catch.hpp"

#include <arpa/inet.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "peer_process.hpp"
#include "tcp_peer.hpp"
#include "transport/tcp_upgrade.hpp"

using namespace pg_rdma::test;
namespace transport = pg_rdma::transport;
namespace protocol = pg_rdma::protocol;
using transport::Mode;
using transport::UpgradeOutcome;

namespace {

constexpr char kSecondIp[] = "10.99.0.2";     // added beside RXE_IP (10.99.0.1/24)
constexpr char kHello[] = "hello over tcp";   // what a client says after falling back
constexpr std::uint8_t kByte = 42;            // sent over RDMA once set up

std::string primary_ip() { return ip_of(rdma_address(0)); }

sockaddr_storage tcp_peer_of(int fd) {
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    REQUIRE(getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0);
    return peer;
}

}  // namespace

TEST_CASE("an upgraded client connects over RDMA from its TCP connection's local address", "[rdma][addresses]") {
    ExtraAddress second(kSecondIp);
    TcpListener tcp;  // on RXE_IP
    PeerProcess client([&]() -> int {
        // The client's TCP connection comes from the second address, not
        // the one routing would pick for RXE_IP.
        const int fd = tcp_connect(tcp.port, kSecondIp);
        if (fd < 0) return 90;
        auto result = transport::upgrade_client(fd, Mode::Require, Settings{});
        std::fprintf(stderr, "client: %s %s\n", transport::to_string(result.outcome), result.error.message.c_str());
        if (result.outcome != UpgradeOutcome::Rdma) return 91;
        return write_all(*result.connection, &kByte, 1) ? 0 : 92;
    });
    const int fd = tcp.accept_one();
    REQUIRE(read_upgrade_request(fd));
    // The server accepts RDMA only from its TCP peer, kSecondIp.
    auto result = transport::upgrade_server(fd, Settings{});
    INFO(result.error.message);
    REQUIRE(result.outcome == UpgradeOutcome::Rdma);
    std::uint8_t byte = 0;
    CHECK(read_exact(*result.connection, &byte, 1));
    CHECK(byte == kByte);
    CHECK(client.wait() == 0);
    close(fd);
}

TEST_CASE("without a source address this host's RDMA connections come from RXE_IP, not the second address",
          "[rdma][addresses]") {
    // The premise of the test above: had the client not bound its source,
    // the server would have refused its connection.
    ExtraAddress second(kSecondIp);
    Pipe port_pipe;
    PeerProcess client([&]() -> int {
        std::string error;
        (void)connect_to_parent(port_pipe, Settings{}, error);  // refused, as expected
        return 0;
    });
    // The accept waits out its whole deadline (the refused request is not
    // the one it waits for), which must cover the child's whole first
    // connect: library start-up, address, route, QP and registration, on an
    // emulated CPU where that alone has taken over a second.
    Settings s;
    s.connect_timeout = 8s;
    Rendezvous rendezvous(port_pipe, s);
    const sockaddr_in expected = ipv4(kSecondIp);
    transport::Error err;
    auto conn = rendezvous.listener().accept(test_nonce(), reinterpret_cast<const sockaddr*>(&expected), err);
    CHECK_FALSE(conn);
    CHECK_THAT(err.message, testing::contains_text("came from " + primary_ip() + ":"));
    CHECK(client.wait() == 0);
}

TEST_CASE("an upgrade reply naming another address than the TCP peer is refused unless allow_redirect is set",
          "[rdma][addresses]") {
    ExtraAddress second(kSecondIp);
    TcpListener tcp;  // on RXE_IP: the client's TCP peer is RXE_IP
    PeerProcess client([&]() -> int {
        {  // require: fails, and says which addresses differ
            const int fd = tcp_connect(tcp.port);
            auto r = transport::upgrade_client(fd, Mode::Require, Settings{});
            std::fprintf(stderr, "require: %s %s\n", transport::to_string(r.outcome), r.error.message.c_str());
            if (r.outcome != UpgradeOutcome::Failed) return 90;
            if (r.error.message.find(std::string(kSecondIp) + ":") == std::string::npos ||
                r.error.message.find(primary_ip() + ":") == std::string::npos)
                return 91;
            close(fd);
        }
        {  // prefer: the session stays on the same TCP connection
            const int fd = tcp_connect(tcp.port);
            auto r = transport::upgrade_client(fd, Mode::Prefer, Settings{});
            std::fprintf(stderr, "prefer: %s %s\n", transport::to_string(r.outcome), r.error.message.c_str());
            if (r.outcome != UpgradeOutcome::TcpSame) return 92;
            if (!send_fully(fd, kHello, sizeof kHello)) return 93;
            close(fd);
        }
        {  // allowed: connects to the other address
            const int fd = tcp_connect(tcp.port);
            Settings s;
            s.allow_redirect = true;
            auto r = transport::upgrade_client(fd, Mode::Require, s);
            std::fprintf(stderr, "allowed: %s %s\n", transport::to_string(r.outcome), r.error.message.c_str());
            if (r.outcome != UpgradeOutcome::Rdma) return 94;
            if (!write_all(*r.connection, &kByte, 1)) return 95;
            close(fd);
        }
        return 0;
    });
    // A hand-rolled server whose RDMA endpoint is on the second address.
    const sockaddr_in at = ipv4(kSecondIp);
    transport::Error err;
    auto listener = transport::Listener::create(reinterpret_cast<const sockaddr*>(&at), Settings{}, err);
    REQUIRE(listener);
    const sockaddr_storage bound = listener->local_address();
    const auto reply = accept_reply(*reinterpret_cast<const sockaddr_in*>(&bound), test_nonce());
    const auto next_session = [&] {
        const int fd = tcp.accept_one();
        REQUIRE(read_upgrade_request(fd));
        REQUIRE(send_fully(fd, reply.data(), reply.size()));
        return fd;
    };
    {
        const int fd = next_session();
        std::uint8_t byte = 0;
        CHECK(recv(fd, &byte, 1, 0) == 0);  // the client hung up without a word...
        pollfd p{listener->fd(), POLLIN, 0};
        CHECK(poll(&p, 1, 0) == 0);  // ...and never asked for the RDMA endpoint
        close(fd);
    }
    {
        const int fd = next_session();
        char hello[sizeof kHello] = {};
        CHECK(read_fully(fd, hello, sizeof hello));
        CHECK(std::string(hello) == kHello);
        close(fd);
    }
    {
        const int fd = next_session();
        const sockaddr_storage peer = tcp_peer_of(fd);
        auto conn = listener->accept(test_nonce(), reinterpret_cast<const sockaddr*>(&peer), err);
        INFO(err.message);
        REQUIRE(conn);
        std::uint8_t byte = 0;
        CHECK(read_exact(*conn, &byte, 1));
        CHECK(byte == kByte);
        close(fd);
    }
    CHECK(client.wait() == 0);
}
