// Sessions over IPv6: a TCP connection between two IPv6 addresses of the rxe
// netdev upgrades to RDMA on the device's IPv6 GID (RoCE v2 over IPv6), the
// reply naming the endpoint as family 6. rxe makes a GID for every IPv6
// address of its netdev; the test adds a unique local address for itself.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "peer_process.hpp"
#include "tcp_peer.hpp"
#include "transport/tcp_upgrade.hpp"

using namespace pg_rdma::test;
namespace transport = pg_rdma::transport;
using transport::Mode;
using transport::UpgradeOutcome;

namespace {

constexpr char kIpv6[] = "fd99::1";  // unique local: never routed off the guest
constexpr char kIpv6Gid[] = "fd99:0000:0000:0000:0000:0000:0000:0001";
constexpr auto kGidWait = std::chrono::seconds(10);  // rxe adds GIDs from a workqueue
constexpr std::uint8_t kByte = 42;

bool device_has(const std::string& gid) {
    const char* dev = std::getenv("RXE_DEV");
    const std::string dir = std::string("/sys/class/infiniband/") + (dev != nullptr ? dev : "rxe0") + "/ports/1/gids/";
    for (int i = 0; i < 32; ++i) {
        std::ifstream in(dir + std::to_string(i));
        std::string line;
        if (in && std::getline(in, line) && line == gid) return true;
    }
    return false;
}

// The address on the rxe netdev for the test's lifetime (nodad: usable at
// once, no duplicate detection on a device with no wire).
class Ipv6Address {
public:
    Ipv6Address() {
        const char* netdev = std::getenv("RXE_NETDEV");
        if (netdev == nullptr) throw std::runtime_error("RXE_NETDEV is not set: run this test in the Soft-RoCE guest");
        netdev_ = netdev;
        const std::string cmd = "ip -6 addr add " + std::string(kIpv6) + "/64 dev " + netdev_ + " nodad";
        if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
        const auto until = std::chrono::steady_clock::now() + kGidWait;
        while (!device_has(kIpv6Gid)) {
            if (std::chrono::steady_clock::now() > until) throw std::runtime_error("rxe has no GID for fd99::1");
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    ~Ipv6Address() {
        const std::string cmd = "ip -6 addr del " + std::string(kIpv6) + "/64 dev " + netdev_;
        (void)std::system(cmd.c_str());
    }
    Ipv6Address(const Ipv6Address&) = delete;
    Ipv6Address& operator=(const Ipv6Address&) = delete;

private:
    std::string netdev_;
};

sockaddr_in6 ipv6_at(std::uint16_t port) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    REQUIRE(inet_pton(AF_INET6, kIpv6, &a.sin6_addr) == 1);
    return a;
}

}  // namespace

TEST_CASE("a session between IPv6 addresses upgrades to RDMA over the device's IPv6 GID", "[rdma][ipv6]") {
    Ipv6Address address;
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
