// Flow control against the real rxe device: a stalled reader, many streams.
#include "testing/catch.hpp"

#include <poll.h>

#include <vector>

#include "with_peer.hpp"

using namespace pg_rdma::test;

namespace {

constexpr std::uint32_t kParentSeed = 0x3333;
constexpr std::uint32_t kChildSeed = 0x4444;

}  // namespace

TEST_CASE("a reader that stops reading makes the writer see EAGAIN and loses no byte", "[rdma][flow]") {
    constexpr std::size_t kBytes = 4 * 1024 * 1024;
    Pipe go_pipe;
    const auto stalled_reader = [&](Connection& conn) -> int {
        go_pipe.recv_u32();  // not reading until the writer says so
        if (!read_pattern(conn, kBytes, kParentSeed)) return 1;
        return read_eof(conn) ? 0 : 2;
    };
    const auto writer = [&](Connection& conn, PeerProcess&) {
        std::vector<std::uint8_t> data(kBytes);
        fill_pattern(data.data(), data.size(), kParentSeed);
        std::size_t accepted = 0;
        for (;;) {  // fill until the transport pushes back
            const ssize_t n = conn.write(data.data() + accepted, data.size() - accepted);
            if (n < 0) break;
            accepted += static_cast<std::size_t>(n);
            REQUIRE(accepted < data.size());
        }
        REQUIRE(errno == EAGAIN);
        CHECK(accepted >= Settings{}.rx_buffer_size);  // the peer's ring did fill
        CHECK(conn.stats().write_blocked > 0);
        // Still blocked a while later: nothing was silently dropped to make room.
        pollfd p{conn.fd(), POLLIN, 0};
        poll(&p, 1, 300);
        CHECK(conn.write(data.data() + accepted, data.size() - accepted) == -1);
        CHECK(errno == EAGAIN);

        go_pipe.send_u32(1);
        REQUIRE(write_all(conn, data.data() + accepted, data.size() - accepted));
        CHECK(conn.close() == 0);
    };
    with_peer(Settings{}, stalled_reader, writer);
}

namespace {

constexpr int kConnections = 64;
constexpr std::uint64_t kBytesEach = 256 * 1024;

// Moves kBytesEach each way on every connection at once, driven by poll()
// over all their descriptors, and checks every byte.
bool pump_all(std::vector<std::unique_ptr<Connection>>& conns, std::uint32_t send_seed, std::uint32_t recv_seed,
              std::string& why) {
    std::vector<std::uint64_t> sent(conns.size()), received(conns.size());
    std::vector<std::uint8_t> buf(64 * 1024);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
    std::size_t done = 0;
    while (done < conns.size()) {
        if (std::chrono::steady_clock::now() > deadline) return why = "timed out", false;
        std::vector<pollfd> fds;
        for (auto& c : conns) fds.push_back({c->fd(), POLLIN, 0});
        poll(fds.data(), fds.size(), 100);
        done = 0;
        for (std::size_t i = 0; i < conns.size(); ++i) {
            Connection& c = *conns[i];
            const auto seed_out = send_seed + static_cast<std::uint32_t>(i);
            const auto seed_in = recv_seed + static_cast<std::uint32_t>(i);
            if (sent[i] < kBytesEach) {
                const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), kBytesEach - sent[i]));
                fill_pattern(buf.data(), n, seed_out, sent[i]);
                const ssize_t w = c.write(buf.data(), n);
                if (w > 0) sent[i] += static_cast<std::uint64_t>(w);
                else if (errno != EAGAIN) return why = "write failed on connection " + std::to_string(i), false;
            }
            if (received[i] < kBytesEach) {
                const ssize_t r = c.read(buf.data(), buf.size());
                if (r > 0) {
                    if (!check_pattern(buf.data(), static_cast<std::size_t>(r), seed_in, received[i]))
                        return why = "corrupt bytes on connection " + std::to_string(i), false;
                    received[i] += static_cast<std::uint64_t>(r);
                } else if (r == 0 || errno != EAGAIN) {
                    return why = "read failed on connection " + std::to_string(i), false;
                }
            }
            if (sent[i] == kBytesEach && received[i] == kBytesEach) ++done;
        }
    }
    return true;
}

}  // namespace

TEST_CASE("64 concurrent connections each move data intact", "[rdma][flow]") {
    Pipe port_pipe;
    PeerProcess peer([&]() -> int {
        const auto port = static_cast<std::uint16_t>(port_pipe.recv_u32());  // once, for all connections
        std::vector<std::unique_ptr<Connection>> conns;
        for (int i = 0; i < kConnections; ++i) {
            std::string error;
            conns.push_back(connect_to_parent(port, Settings{}, error));
            if (!conns.back()) {
                std::fprintf(stderr, "child: connection %d: %s\n", i, error.c_str());
                return 90;
            }
        }
        std::string why;
        if (!pump_all(conns, kChildSeed, kParentSeed, why)) {
            std::fprintf(stderr, "child: %s\n", why.c_str());
            return 1;
        }
        for (auto& c : conns)
            if (c->close() != 0) return 2;
        return 0;
    });
    Rendezvous rendezvous(port_pipe, Settings{});
    std::vector<std::unique_ptr<Connection>> conns;
    for (int i = 0; i < kConnections; ++i) conns.push_back(rendezvous.accept());
    std::string why;
    const bool ok = pump_all(conns, kParentSeed, kChildSeed, why);
    INFO(why);
    REQUIRE(ok);
    for (auto& c : conns) CHECK(read_eof(*c));
    CHECK(peer.wait() == 0);
}
