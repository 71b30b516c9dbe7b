// Sessions over IPv6: a TCP connection between two IPv6 addresses of the rxe
// netdev upgrades to RDMA on the device's IPv6 GID (RoCE v2 over IPv6), the
// reply naming the endpoint as family 6. rxe makes a GID for every IPv6
// address of its netdev; the test adds a unique local address for itself.
#include "testing/catch.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>

#include "peer_process.hpp"
#include "tcp_peer.hpp"
#include "transport/tcp_upgrade.hpp"

using namespace pg_rdma::test;
namespace transport = pg_rdma::transport;
using transport::Mode;
using transport::UpgradeOutcome;

namespace {

constexpr char kIpv6[] = "fd99::1";  // unique local: never routed off the guest
constexpr std::uint8_t kByte = 42;

sockaddr_in6 ipv6_at(std::uint16_t port) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    REQUIRE(inet_pton(AF_INET6, kIpv6, &a.sin6_addr) == 1);
    return a;
}

}  // namespace

TEST_CASE("a session between IPv6 addresses upgrades to RDMA over the device's IPv6 GID", "[rdma][ipv6]") {
    ExtraAddress address(kIpv6);
    const int listener = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(listener >= 0);
    sockaddr_in6 at = ipv6_at(0);
    REQUIRE(bind(listener, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0);
    REQUIRE(listen(listener, 1) == 0);
    socklen_t len = sizeof at;
    REQUIRE(getsockname(listener, reinterpret_cast<sockaddr*>(&at), &len) == 0);
    const std::uint16_t port = ntohs(at.sin6_port);

    PeerProcess client([&]() -> int {
        const int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const sockaddr_in6 to = ipv6_at(port);
        if (fd < 0 || connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) return 90;
        auto result = transport::upgrade_client(fd, Mode::Require, Settings{});
        std::fprintf(stderr, "client: %s %s\n", transport::to_string(result.outcome), result.error.message.c_str());
        if (result.outcome != UpgradeOutcome::Rdma) return 91;
        return write_all(*result.connection, &kByte, 1) ? 0 : 92;
    });
    const int fd = accept(listener, nullptr, nullptr);
    REQUIRE(fd >= 0);
    REQUIRE(read_upgrade_request(fd));
    auto result = transport::upgrade_server(fd, Settings{});
    INFO(result.error.message);
    REQUIRE(result.outcome == UpgradeOutcome::Rdma);
    std::uint8_t byte = 0;
    CHECK(read_exact(*result.connection, &byte, 1));
    CHECK(byte == kByte);
    CHECK(client.wait() == 0);
    close(fd);
    close(listener);
}
