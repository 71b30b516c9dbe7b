// A listener refuses a connection request that is not the one it waits
// for (another session's nonce): the refused client is told what refusals
// mean, and the listener goes on waiting for the right one. Each client is
// forked before the parent uses RDMA (as a backend is forked from a
// postmaster that never does), and learns the listener's port over a pipe.
#include "testing/catch.hpp"

#include <cerrno>
#include <cstdio>
#include <string>

#include "peer_process.hpp"
#include "tcp_peer.hpp"
#include "transport/rdma_setup.hpp"

using namespace pg_rdma::test;
namespace transport = pg_rdma::transport;
namespace protocol = pg_rdma::protocol;

namespace {

constexpr std::uint8_t kByte = 42;  // sent once the right request got through

protocol::Nonce another_nonce() {
    protocol::Nonce n = test_nonce();
    n[0] ^= 0xff;
    return n;
}

}  // namespace

TEST_CASE("a request with another session's nonce is refused, its client told why, and the right one still gets in",
          "[rdma][refusal]") {
    Pipe port;
    PeerProcess client([&]() -> int {
        warm_up_rdma_libraries();  // the first use's cost, before the listener's deadline runs
        const sockaddr_in to = rdma_address(static_cast<std::uint16_t>(port.recv_u32()));
        const auto& dst = reinterpret_cast<const sockaddr&>(to);
        transport::Error cerr;
        if (transport::connect(&dst, another_nonce(), Settings{}, cerr)) return 90;
        std::fprintf(stderr, "refused client: %s\n", cerr.message.c_str());
        // Status 28 (IB_CM_REJ_CONSUMER_DEFINED): the listener closed it
        // unaccepted; the message names the refusal among the causes.
        if (cerr.message.find("REJECTED") == std::string::npos ||
            cerr.message.find("refused it (a wrong nonce") == std::string::npos)
            return 91;
        auto conn = transport::connect(&dst, test_nonce(), Settings{}, cerr);
        if (!conn) {
            std::fprintf(stderr, "right client: %s\n", cerr.message.c_str());
            return 92;
        }
        return write_all(*conn, &kByte, 1) ? 0 : 93;
    });
    Rendezvous rendezvous(port, Settings{});
    // One accept sees both requests: it refuses the first and takes the second.
    transport::Error err;
    auto conn = rendezvous.listener().accept(test_nonce(), nullptr, err);
    INFO(err.message);
    REQUIRE(conn);
    std::uint8_t byte = 0;
    CHECK(read_exact(*conn, &byte, 1));
    CHECK(byte == kByte);
    CHECK(client.wait() == 0);
}

TEST_CASE("a listener that saw only refused requests says so when it gives up", "[rdma][refusal]") {
    Pipe port;
    PeerProcess client([&]() -> int {
        warm_up_rdma_libraries();
        const sockaddr_in to = rdma_address(static_cast<std::uint16_t>(port.recv_u32()));
        transport::Error cerr;
        return transport::connect(reinterpret_cast<const sockaddr*>(&to), another_nonce(), Settings{}, cerr) ? 90 : 0;
    });
    Settings s;
    // Long enough for the refused request to arrive on a loaded emulated CPU.
    s.connect_timeout = std::chrono::milliseconds(6000);
    Rendezvous rendezvous(port, s);
    transport::Error err;
    auto conn = rendezvous.listener().accept(test_nonce(), nullptr, err);
    CHECK_FALSE(conn);
    INFO(err.message);
    CHECK(err.code == ETIMEDOUT);
    // What the operator needs to see: it was not silence, a request came and was refused.
    CHECK(err.message.find("refused a request") != std::string::npos);
    CHECK(err.message.find("nonce") != std::string::npos);
    CHECK(client.wait() == 0);
}
