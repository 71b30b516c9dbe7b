// The upgrade is bounded on either side. A peer that stalls before the
// server has sent its side of the handshake costs the server one
// connect_timeout, never a fresh timeout per stage (it used to wait up to
// twice connect_timeout); later stalls get one extension each
// (tcp_upgrade.hpp), and the last case here is the wait for a silent
// client's first bytes. The client waits for the reply (the server's
// startup, which TCP would wait for too), then gives the RDMA setup its
// connect_timeout, or the server's advertised budget when that is less, so
// that it never waits longer than the server.
#include "testing/catch.hpp"

#include <rdma/rdma_cma.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "peer_process.hpp"
#include "tcp_peer.hpp"
#include "transport/connector.hpp"
#include "transport/tcp_upgrade.hpp"

using namespace pg_rdma::test;
namespace transport = pg_rdma::transport;
namespace protocol = pg_rdma::protocol;
using transport::Mode;
using transport::UpgradeOutcome;

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kTimeout = 5000ms;  // connect_timeout in these tests
// What a bounded setup may take past its deadline: the last step and the
// teardown, on an emulated CPU whose host may stall it.
constexpr auto kSlack = 2000ms;
// When the stalling peer makes its late move: late enough that a fresh
// timeout for the next stage would overrun kTimeout + kSlack, early enough
// that the move arrives well inside kTimeout.
constexpr auto kLateMove = 2500ms;
// What the late move itself may take to reach the other side (a connection
// request, or the reply and the client's connection request after it).
constexpr auto kArrival = 2000ms;
static_assert(kLateMove + kTimeout > kTimeout + kSlack && kLateMove + kArrival < kTimeout);
constexpr unsigned kStallSeconds = 60;  // a stalled peer's silence; it is killed long before

Settings with_timeout() {
    Settings s;
    s.connect_timeout = kTimeout;
    return s;
}

// Serves the upgrade on the next connection; how long upgrade_server took.
double serve_one(const TcpListener& tcp, transport::UpgradeResult& result) {
    const int fd = tcp.accept_one();
    REQUIRE(fd >= 0);
    REQUIRE(read_upgrade_request(fd));
    const auto start = Clock::now();
    result = transport::upgrade_server(fd, with_timeout());
    const double took = ms_between(start, Clock::now());
    close(fd);
    return took;
}

constexpr double ms(std::chrono::milliseconds d) { return static_cast<double>(d.count()); }

// An RC connection to `dst` with the right nonce that never sends a byte:
// the server reaches its handshake stage and waits there. Synchronous
// librdmacm (no event channel); the process exits without cleaning up.
// Address, route and QP are prepared first so that only the connection
// request is sent at `connect_at`: on a loaded guest the preparation alone
// has taken over a second, which pushed the request past the server's
// deadline and tested the wrong stage.
bool connect_at_and_stay_silent(const sockaddr_in& dst, const protocol::Nonce& nonce, Clock::time_point connect_at) {
    constexpr int kResolveMs = 2000;
    rdma_cm_id* id = nullptr;
    if (rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP) != 0) return false;
    sockaddr_in to = dst;
    if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&to), kResolveMs) != 0) return false;
    if (rdma_resolve_route(id, kResolveMs) != 0) return false;
    ibv_qp_init_attr attr{};
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    if (rdma_create_qp(id, nullptr, &attr) != 0) return false;
    const auto private_data = protocol::encode_connect_private_data(nonce);
    rdma_conn_param param{};
    param.private_data = private_data.data();
    param.private_data_len = static_cast<std::uint8_t>(private_data.size());
    param.retry_count = 7;
    param.rnr_retry_count = 7;
    std::this_thread::sleep_until(connect_at);
    return rdma_connect(id, &param) == 0;
}

// A real rdma_cm endpoint that never accepts: a client's connection request
// reaches it and gets no answer. The reply naming it, with `budget`.
struct SilentEndpoint {
    std::unique_ptr<transport::Listener> listener;
    protocol::UpgradeAcceptBytes reply{};
};

SilentEndpoint silent_endpoint(std::chrono::milliseconds budget = 0ms) {
    SilentEndpoint e;
    const sockaddr_in at = rdma_address(0);
    transport::Error err;
    e.listener = transport::Listener::create(reinterpret_cast<const sockaddr*>(&at), Settings{}, err);
    REQUIRE(e.listener);
    const sockaddr_storage bound = e.listener->local_address();
    e.reply = accept_reply(*reinterpret_cast<const sockaddr_in*>(&bound), test_nonce(), budget);
    return e;
}

// The client side of the tests below: a prefer upgrade, timed, its outcome
// printed for the log; how long it took.
double timed_prefer_upgrade(std::uint16_t port, transport::UpgradeResult& result) {
    const int fd = tcp_connect(port);
    if (fd < 0) return -1;
    const auto start = Clock::now();
    result = transport::upgrade_client(fd, Mode::Prefer, with_timeout());
    const double took = ms_between(start, Clock::now());
    std::fprintf(stderr, "client: %s after %.0f ms: %s\n", transport::to_string(result.outcome), took,
                 result.error.message.c_str());
    return took;
}

}  // namespace

TEST_CASE("a client that reads the reply and never connects over RDMA costs the server one connect_timeout",
          "[rdma][deadline]") {
    TcpListener tcp;
    PeerProcess client([&]() -> int {
        const int fd = tcp_connect(tcp.port);
        protocol::UpgradeAcceptBytes reply{};
        if (fd < 0 || !request_and_read_accept(fd, reply)) return 90;
        sleep(kStallSeconds);
        return 0;
    });
    transport::UpgradeResult result;
    const double took = serve_one(tcp, result);
    INFO(result.error.message << "; took " << took << " ms");
    CHECK(result.outcome == UpgradeOutcome::TcpSame);
    CHECK(result.error.code == ETIMEDOUT);
    CHECK(took >= ms(kTimeout));
    CHECK(took < ms(kTimeout + kSlack));
}

TEST_CASE("a client that connects after the server stopped waiting is told why it was rejected", "[rdma][deadline]") {
    TcpListener tcp;
    Pipe server_gave_up;
    PeerProcess client([&]() -> int {
        const int fd = tcp_connect(tcp.port);
        protocol::UpgradeAcceptBytes bytes{};
        if (fd < 0 || !request_and_read_accept(fd, bytes)) return 90;
        const auto reply = protocol::decode_upgrade_reply(bytes);
        if (!reply.is_ok()) return 91;
        server_gave_up.recv_u32();
        const sockaddr_in dst = rdma_address(reply.value.endpoint.port);
        transport::Error err;
        if (transport::connect(reinterpret_cast<const sockaddr*>(&dst), reply.value.endpoint.nonce, Settings{}, err))
            return 92;
        std::fprintf(stderr, "client: %s\n", err.message.c_str());
        // The advice a user needs, not only the event's status number.
        return err.message.find("the server stopped waiting") != std::string::npos &&
                       err.message.find("pg_rdma.connect_timeout") != std::string::npos
                   ? 0
                   : 93;
    });
    transport::UpgradeResult result;
    serve_one(tcp, result);
    INFO(result.error.message);
    CHECK(result.outcome == UpgradeOutcome::TcpSame);
    CHECK(result.error.code == ETIMEDOUT);
    server_gave_up.send_u32(1);
    CHECK(client.wait() == 0);
}

TEST_CASE("a client that connects over RDMA late and never starts the handshake costs the server one "
          "connect_timeout",
          "[rdma][deadline]") {
    TcpListener tcp;
    PeerProcess client([&]() -> int {
        const int fd = tcp_connect(tcp.port);
        protocol::UpgradeAcceptBytes bytes{};
        if (fd < 0 || !request_and_read_accept(fd, bytes)) return 90;
        const auto late = Clock::now() + kLateMove;
        const auto reply = protocol::decode_upgrade_reply(bytes);
        if (!reply.is_ok()) return 91;
        // Bare librdmacm rather than our Connector: the Connector sends its
        // offer in the step that sees ESTABLISHED, and a client descheduled
        // there would find the server's answer and finish the handshake.
        const sockaddr_in dst = rdma_address(reply.value.endpoint.port);
        if (!connect_at_and_stay_silent(dst, reply.value.endpoint.nonce, late)) return 92;
        sleep(kStallSeconds);
        return 0;
    });
    transport::UpgradeResult result;
    const double took = serve_one(tcp, result);
    INFO(result.error.message << "; took " << took << " ms");
    CHECK(result.outcome == UpgradeOutcome::TcpSame);
    CHECK(result.error.code == ETIMEDOUT);
    CHECK_THAT(result.error.message, testing::contains_text("handshake"));
    CHECK(took < ms(kTimeout + kSlack));
}

TEST_CASE("a server that replies late and never accepts over RDMA costs the client one connect_timeout from the "
          "reply",
          "[rdma][deadline]") {
    TcpListener tcp;
    PeerProcess client([&]() -> int {
        transport::UpgradeResult result;
        const double took = timed_prefer_upgrade(tcp.port, result);
        if (took < 0) return 90;
        if (result.outcome != UpgradeOutcome::TcpSame || result.error.code != ETIMEDOUT) return 91;
        // Timed out at the RDMA stage: the reply came in time.
        if (result.error.message.find("did not answer the RDMA upgrade request") != std::string::npos) return 93;
        // The RDMA stage's own connect_timeout, counted from the reply.
        if (took < ms(kLateMove + kTimeout) - ms(kSlack)) return 94;
        return took < ms(kLateMove + kTimeout + kSlack) ? 0 : 92;
    });
    const int fd = tcp.accept_one();
    REQUIRE(read_upgrade_request(fd));
    const auto late = Clock::now() + kLateMove;
    // Made before the pause, so that only the reply is late.
    const SilentEndpoint endpoint = silent_endpoint();
    std::this_thread::sleep_until(late);
    REQUIRE(send_fully(fd, endpoint.reply.data(), endpoint.reply.size()));
    CHECK(client.wait() == 0);
    close(fd);
}

TEST_CASE("a client gives up on RDMA within the server's advertised budget when that is less than its own",
          "[rdma][deadline]") {
    constexpr auto kServerBudget = 1000ms;
    static_assert(kServerBudget + kSlack < kTimeout);
    TcpListener tcp;
    PeerProcess client([&]() -> int {
        transport::UpgradeResult result;
        const double took = timed_prefer_upgrade(tcp.port, result);
        if (took < 0) return 90;
        if (result.outcome != UpgradeOutcome::TcpSame || result.error.code != ETIMEDOUT) return 91;
        // A silent RDMA peer is named, with what to check.
        if (result.error.message.find("UDP port 4791") == std::string::npos) return 93;
        return took < ms(kServerBudget + kSlack) ? 0 : 92;
    });
    const int fd = tcp.accept_one();
    REQUIRE(read_upgrade_request(fd));
    const SilentEndpoint endpoint = silent_endpoint(kServerBudget);
    REQUIRE(send_fully(fd, endpoint.reply.data(), endpoint.reply.size()));
    CHECK(client.wait() == 0);
    close(fd);
}

TEST_CASE("a server that never replies makes a prefer client reconnect on plain TCP, and a require client fail",
          "[rdma][deadline]") {
    for (const Mode mode : {Mode::Prefer, Mode::Require}) {
        TcpListener tcp;
        PeerProcess client([&]() -> int {
            const int fd = tcp_connect(tcp.port);
            if (fd < 0) return 90;
            const auto start = Clock::now();
            const auto result = transport::upgrade_client(fd, mode, with_timeout());
            const double took = ms_between(start, Clock::now());
            std::fprintf(stderr, "client: %s after %.0f ms: %s\n", transport::to_string(result.outcome), took,
                         result.error.message.c_str());
            // The request may still be read: only a new connection is clean.
            const UpgradeOutcome expected = mode == Mode::Prefer ? UpgradeOutcome::TcpReconnect : UpgradeOutcome::Failed;
            if (result.outcome != expected || result.error.code != ETIMEDOUT) return 91;
            if (result.error.message.find("did not answer the RDMA upgrade request") == std::string::npos) return 93;
            return took < ms(kTimeout + kSlack) ? 0 : 92;
        });
        const int fd = tcp.accept_one();
        REQUIRE(read_upgrade_request(fd));
        CHECK(client.wait() == 0);  // the server says nothing meanwhile
        close(fd);
    }
}

// Confirming (tcp_upgrade.hpp): the server's side is complete and waits for
// the client's first bytes. A client that holds its live connection and
// says nothing keeps it once a whole connect_timeout has passed: a client
// that gave up would have let the queue pair go.
TEST_CASE("a client that completes and says nothing keeps its RDMA session after the server waited one "
          "connect_timeout for its first bytes",
          "[rdma][deadline]") {
    TcpListener tcp;
    Pipe server_decided;
    PeerProcess client([&]() -> int {
        const int fd = tcp_connect(tcp.port);
        if (fd < 0) return 90;
        auto result = transport::upgrade_client(fd, Mode::Require, with_timeout());
        if (result.outcome != UpgradeOutcome::Rdma) return 91;
        server_decided.recv_u32();  // silent until then
        const std::uint8_t byte = 42;
        return write_all(*result.connection, &byte, 1) ? 0 : 92;
    });
    transport::UpgradeResult result;
    const double took = serve_one(tcp, result);
    INFO(result.error.message << "; took " << took << " ms");
    REQUIRE(result.outcome == UpgradeOutcome::Rdma);
    CHECK(took >= ms(kTimeout) - ms(kSlack));
    server_decided.send_u32(1);
    std::uint8_t byte = 0;
    CHECK(read_exact(*result.connection, &byte, 1));
    CHECK(byte == 42);
    CHECK(client.wait() == 0);
}
