// A peer that dies or misbehaves, against the real rxe device.
#include "testing/catch.hpp"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <vector>
#include <variant>

#include "with_peer.hpp"
#include "protocol/byte_order.hpp"
#include "transport/cm_events.hpp"
#include "transport/endpoint.hpp"

using namespace pg_rdma::test;
namespace transport = pg_rdma::transport;
namespace protocol = pg_rdma::protocol;

namespace {

Settings fast_keepalive() {
    Settings s;
    s.keepalive_interval = 100ms;
    s.keepalive_timeout = 1000ms;
    return s;
}

protocol::ControlBytes offer_bytes(const Settings& s = Settings{}) {
    protocol::FeatureOffer offer{protocol::kMinProtocolVersion, protocol::kMaxProtocolVersion, s.credits,
                                 protocol::kSupportedFeatures, s.rx_buffer_size,
                                 static_cast<std::uint32_t>(s.keepalive_interval.count()),
                                 static_cast<std::uint32_t>(s.keepalive_timeout.count())};
    return protocol::encode_control(offer);
}

// A hand-rolled peer built from the transport's lower layer, so it can send
// exactly the bytes a test wants, including ones Stream would never send.
class RawPeer {
public:
    bool connect(std::uint16_t port, std::string& why) {
        const auto deadline = transport::SetupClock::now() + 10s;
        transport::Error err;
        ResolvedId route;
        if (!resolve_route_to(port, route, why)) return false;
        ep_ = transport::Endpoint::create(std::move(route.channel), std::move(route.id), Settings{}, err);
        if (!ep_) return why = err.message, false;
        const auto pd = protocol::encode_connect_private_data(test_nonce());
        rdma_conn_param param{};
        param.private_data = pd.data();
        param.private_data_len = static_cast<std::uint8_t>(pd.size());
        param.retry_count = 7;
        param.rnr_retry_count = 3;
        if (rdma_connect(ep_->id(), &param) != 0 ||
            !transport::expect_cm_event(ep_->cm_channel(), RDMA_CM_EVENT_ESTABLISHED, deadline, "connect", err))
            return why = err.message, false;
        return true;
    }

    // Connects and does the active side of a correct handshake.
    bool connect_and_handshake(std::uint16_t port, const Settings& offer = Settings{}) {
        std::string why;
        return connect(port, why) && send(offer_bytes(offer)) && receive(2) &&
               send(protocol::encode_control(ep_->rx_ring_announcement()));
    }

    bool send(const protocol::ControlBytes& bytes) {
        const std::uint64_t seq = next_seq_++;
        return ep_->post_control(static_cast<std::uint32_t>(seq), bytes, seq, true, true);
    }

    // Waits for `count` receive completions (the victim's handshake replies).
    bool receive(int count) {
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        while (count > 0 && std::chrono::steady_clock::now() < deadline) {
            std::array<ibv_wc, 8> wcs{};
            const int n = ep_->poll(wcs);
            for (int i = 0; i < n; ++i) {
                const ibv_wc& wc = wcs[static_cast<std::size_t>(i)];
                if ((wc.wr_id & transport::kRecvWrFlag) == 0) continue;
                --count;
                const auto slot = static_cast<std::uint32_t>(wc.wr_id & ~transport::kRecvWrFlag);
                const auto msg = protocol::decode_control({ep_->control_rx_slot(slot), wc.byte_len});
                if (msg.is_ok() && std::holds_alternative<protocol::XferMemory>(msg.value))
                    victim_ring_ = std::get<protocol::XferMemory>(msg.value);
            }
            usleep(1000);
        }
        return count <= 0;
    }

    // True once the victim has disconnected us (it noticed the violation).
    bool disconnected_within(std::chrono::seconds limit) {
        transport::Error err;
        const auto deadline = transport::SetupClock::now() + limit;
        for (;;) {
            auto event = transport::next_cm_event(ep_->cm_channel(), deadline, "disconnect", err);
            if (!event) return false;
            if (event->event == RDMA_CM_EVENT_DISCONNECTED) return true;
        }
    }

    transport::Endpoint& endpoint() { return *ep_; }

    // The queue pair stops answering: packets to it are dropped, nothing is
    // sent, and the connection is never torn down. To the other side this is
    // a host that vanished from the network.
    bool go_silent() {
        ibv_qp_attr attr{};
        attr.qp_state = IBV_QPS_ERR;
        return ibv_modify_qp(ep_->id()->qp, &attr, IBV_QP_STATE) == 0;
    }
    // The victim's RX ring, once its RegisterXferMemory was received.
    [[nodiscard]] const protocol::XferMemory& victim_ring() const { return victim_ring_; }

private:
    protocol::XferMemory victim_ring_{};
    std::unique_ptr<transport::Endpoint> ep_;
    std::uint64_t next_seq_ = 0;
};

// A Keepalive with a reserved byte set: well-formed in size, invalid inside.
protocol::ControlBytes malformed_bytes() {
    protocol::ControlBytes b = protocol::encode_control(protocol::Keepalive{});
    b[17] = 0xAB;
    return b;
}

}  // namespace

namespace {

// A peer that connects and then only sleeps.
[[noreturn]] int connect_and_sleep(Connection&) {
    for (;;) pause();
}

}  // namespace

TEST_CASE("a peer killed with SIGKILL is detected within the keepalive timeout", "[rdma][failure]") {
    const Settings settings = fast_keepalive();
    with_peer(settings, connect_and_sleep, [&](Connection& conn, PeerProcess& peer) {
        peer.kill(SIGKILL);
        CHECK(peer.wait() == 128 + SIGKILL);
        const auto start = std::chrono::steady_clock::now();
        const int err = wait_for_error(conn, std::chrono::duration_cast<std::chrono::seconds>(
                                                 settings.keepalive_timeout) + 5s);  // TCG slack
        INFO("errno " << err << " after "
                      << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                               start).count()
                      << " ms: " << conn.failure_reason());
        CHECK(err == ECONNRESET);  // the kernel disconnected for the killed process: a reset, not a timeout
        std::uint8_t byte = 0;
        CHECK(conn.write(&byte, 1) == -1);  // and writes fail too
    });
}

TEST_CASE("a malformed control message during the handshake fails the accept and the process survives",
          "[rdma][failure]") {
    Pipe port_pipe;
    PeerProcess peer([&]() -> int {
        const auto port = static_cast<std::uint16_t>(port_pipe.recv_u32());  // used twice
        RawPeer evil;
        std::string why;
        if (!evil.connect(port, why) || !evil.send(malformed_bytes())) return 90;
        if (!evil.disconnected_within(10s)) return 1;
        // An honest connection afterwards must still be served.
        auto conn = connect_to_parent(port, Settings{}, why);
        if (!conn) return 2;
        std::uint8_t ping[64];
        fill_pattern(ping, sizeof ping, 7);
        return write_all(*conn, ping, sizeof ping) && conn->close() == 0 ? 0 : 3;
    });
    Rendezvous rendezvous(port_pipe, Settings{});
    transport::Error err;
    auto bad = rendezvous.listener().accept(test_nonce(), nullptr, err);
    CHECK_FALSE(bad);
    CHECK(err.code == EPROTO);
    CHECK_THAT(err.message, testing::contains_text("reserved"));

    auto good = rendezvous.accept();
    std::uint8_t ping[64];
    REQUIRE(read_exact(*good, ping, sizeof ping));
    CHECK(check_pattern(ping, sizeof ping, 7));
    CHECK(peer.wait() == 0);
}

TEST_CASE("a malformed control message on an open connection fails it with EPROTO", "[rdma][failure]") {
    Pipe port_pipe, accepted_pipe;
    PeerProcess peer([&]() -> int {
        // A correct handshake first, then, once the victim holds an open
        // connection, garbage.
        RawPeer evil;
        if (!evil.connect_and_handshake(static_cast<std::uint16_t>(port_pipe.recv_u32()))) return 90;
        accepted_pipe.recv_u32();
        if (!evil.send(malformed_bytes())) return 93;
        return evil.disconnected_within(10s) ? 0 : 1;
    });
    Rendezvous rendezvous(port_pipe, Settings{});
    auto conn = rendezvous.accept();
    accepted_pipe.send_u32(1);
    CHECK(wait_for_error(*conn, 10s) == EPROTO);
    CHECK(peer.wait() == 0);
}

TEST_CASE("a peer writing beyond the ring window it was given fails the connection", "[rdma][failure]") {
    Pipe port_pipe, accepted_pipe;
    PeerProcess peer([&]() -> int {
        RawPeer evil;
        if (!evil.connect_and_handshake(static_cast<std::uint16_t>(port_pipe.recv_u32()))) return 90;
        // Writes 4 KiB into the victim's real ring but claims, in the
        // immediate data, more bytes than the ring holds.
        accepted_pipe.recv_u32();
        const protocol::XferMemory ring = evil.victim_ring();
        if (ring.addr == 0) return 93;
        const transport::RingWrite write{0, 4096, ring.addr, 100, true};
        if (!evil.endpoint().post_write_imm({&write, 1}, ring.rkey, ring.length + 1)) return 94;
        return evil.disconnected_within(10s) ? 0 : 1;
    });
    Rendezvous rendezvous(port_pipe, Settings{});
    auto conn = rendezvous.accept();
    accepted_pipe.send_u32(1);
    CHECK(wait_for_error(*conn, 10s) == EPROTO);
    CHECK(peer.wait() == 0);
}

TEST_CASE("an idle connection outlives many keepalive timeouts", "[rdma][failure]") {
    const Settings settings = fast_keepalive();
    static constexpr auto kIdle = 4s;  // four timeouts
    // Both ends idle in poll() on their fd, as PostgreSQL waits for a socket.
    const auto idle = [](Connection& conn) {
        const auto until = std::chrono::steady_clock::now() + kIdle;
        std::uint8_t byte = 0;
        while (std::chrono::steady_clock::now() < until) {
            pollfd p{conn.fd(), POLLIN, 0};
            poll(&p, 1, 50);
            if (conn.read(&byte, 1) != -1 || errno != EAGAIN) {
                std::fprintf(stderr, "idle read: errno %d (%s)\n", errno, conn.failure_reason().c_str());
                return false;
            }
        }
        return true;
    };
    const auto peer_side = [&](Connection& conn) -> int {
        if (!idle(conn)) return 1;
        std::uint8_t ping[32];
        fill_pattern(ping, sizeof ping, 9);
        return write_all(conn, ping, sizeof ping) && conn.close() == 0 ? 0 : 2;
    };
    with_peer(settings, peer_side, [&](Connection& conn, PeerProcess&) {
        // Idle here too until the peer speaks after its idle time.
        std::uint8_t ping[32];
        REQUIRE(read_exact(conn, ping, sizeof ping, kIdle + 20s));
        CHECK(check_pattern(ping, sizeof ping, 9));
        CHECK(conn.stats().keepalive_probes > 10);  // probes went out while idle
    });
}

TEST_CASE("a peer that falls silent without disconnecting is declared dead by the keepalive", "[rdma][failure]") {
    const Settings settings = fast_keepalive();
    Pipe port_pipe, accepted_pipe;
    PeerProcess peer([&]() -> int {
        RawPeer silent;
        if (!silent.connect_and_handshake(static_cast<std::uint16_t>(port_pipe.recv_u32()), settings)) return 90;
        accepted_pipe.recv_u32();
        if (!silent.go_silent()) return 91;
        for (;;) pause();  // alive, connected, mute
    });
    Rendezvous rendezvous(port_pipe, settings);
    auto conn = rendezvous.accept();
    accepted_pipe.send_u32(1);
    const auto start = std::chrono::steady_clock::now();
    const int err = wait_for_error(*conn, std::chrono::duration_cast<std::chrono::seconds>(
                                              settings.keepalive_timeout) + 10s);  // TCG slack
    INFO("after " << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start)
                         .count()
                  << " ms: " << conn->failure_reason());
    CHECK(err == ETIMEDOUT);
    CHECK_THAT(conn->failure_reason(), testing::contains_text("keepalive"));
    peer.kill(SIGKILL);
    peer.wait();
}

TEST_CASE("a process exiting with several connections to vanished peers drains them within one deadline",
          "[rdma][failure][lifecycle]") {
    // The exit handler must not give each stuck connection its own
    // close_drain_timeout in turn (4 x 3 s): one deadline for all. The
    // bound leaves a whole drain's worth for tearing down and exiting on an
    // emulated CPU, and two drains in a row still fail it.
    constexpr int kConnections = 4;
    constexpr double kDrainS = 3.0;
    Settings settings;
    settings.close_drain_timeout = std::chrono::milliseconds(static_cast<int>(kDrainS * 1000));
    Pipe port_pipe, silent_pipe, exiting_pipe;
    PeerProcess exiter([&]() -> int {
        Rendezvous rendezvous(port_pipe, settings);
        std::vector<std::unique_ptr<Connection>> conns;
        for (int i = 0; i < kConnections; ++i) conns.push_back(rendezvous.accept());
        silent_pipe.recv_u32();
        std::uint8_t data[1024];
        fill_pattern(data, sizeof data, 5);
        for (auto& c : conns)
            if (c->write(data, sizeof data) != static_cast<ssize_t>(sizeof data)) return 1;
        exiting_pipe.send_u32(1);
        std::exit(0);  // without closing: the exit handler drains all four
    });
    const auto port = static_cast<std::uint16_t>(port_pipe.recv_u32());
    std::vector<RawPeer> peers(kConnections);
    for (auto& p : peers) REQUIRE(p.connect_and_handshake(port));
    for (auto& p : peers) REQUIRE(p.go_silent());
    silent_pipe.send_u32(1);
    exiting_pipe.recv_u32();
    const auto start = std::chrono::steady_clock::now();
    CHECK(exiter.wait() == 0);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    INFO("the exit took " << took << " s");
    CHECK(took >= kDrainS - 0.5);  // it did wait for the acknowledgements that never came
    CHECK(took < 2 * kDrainS);     // but once, not four times
}
