// Byte-stream behaviour against the real rxe device: integrity, EOF, close.
#include "testing/catch.hpp"

#include <sys/socket.h>

#include <cstdio>
#include <vector>

#include "with_peer.hpp"

using namespace pg_rdma::test;

namespace {

constexpr std::uint32_t kParentSeed = 0x1111;
constexpr std::uint32_t kChildSeed = 0x2222;

}  // namespace

TEST_CASE("transfers from 1 byte to 64 MiB in both directions at once arrive intact", "[rdma][stream]") {
    // One connection per size, all made by the same peer process: a process
    // may not fork once it has used verbs, so the sizes loop inside.
    static constexpr std::uint64_t kSizes[] = {1, 4095, 65537, (1u << 20) + 13, 64u << 20};
    Pipe port_pipe;
    PeerProcess peer([&]() -> int {
        const auto port = static_cast<std::uint16_t>(port_pipe.recv_u32());
        for (const std::uint64_t size : kSizes) {
            std::string why;
            auto conn = connect_to_parent(port, Settings{}, why);
            if (!conn || !exchange(*conn, size, kChildSeed, size, kParentSeed, why) || conn->close() != 0) {
                std::fprintf(stderr, "child, size %llu: %s\n", static_cast<unsigned long long>(size), why.c_str());
                return 1;
            }
        }
        return 0;
    });
    Rendezvous rendezvous(port_pipe, Settings{});
    for (const std::uint64_t size : kSizes) {
        INFO("size " << size);
        auto conn = rendezvous.accept();
        std::string why;
        const bool ok = exchange(*conn, size, kParentSeed, size, kChildSeed, why);
        INFO(why);
        REQUIRE(ok);
        CHECK(read_eof(*conn));
        CHECK(conn->stats().bytes_received == size);
        CHECK(conn->stats().bytes_sent == size);
    }
    CHECK(peer.wait() == 0);
}

TEST_CASE("orderly close delivers every byte and then EOF", "[rdma][stream]") {
    constexpr std::size_t kBytes = 3 * 1024 * 1024 + 17;
    with_peer(
        Settings{},
        [](Connection& conn) {
            if (!write_pattern(conn, kBytes, kChildSeed)) return 1;
            return conn.close() == 0 ? 0 : 2;
        },
        [](Connection& conn, PeerProcess&) {
            REQUIRE(read_pattern(conn, kBytes, kChildSeed));
            CHECK(read_eof(conn));
            std::uint8_t byte = 0;
            CHECK(conn.read(&byte, 1) == 0);  // EOF stays EOF
        });
}

TEST_CASE("shutdown for writing still lets the peer answer", "[rdma][stream]") {
    with_peer(
        Settings{},
        [](Connection& conn) {
            std::uint8_t request[16];
            fill_pattern(request, sizeof request, kChildSeed);
            if (!write_all(conn, request, sizeof request) || conn.shutdown(SHUT_WR) != 0) return 1;
            std::uint8_t reply[1000];
            if (!read_exact(conn, reply, sizeof reply) || !check_pattern(reply, sizeof reply, kParentSeed)) return 2;
            if (!read_eof(conn)) return 3;
            std::uint8_t more = 0;
            return conn.write(&more, 1) == -1 && errno == EPIPE ? 0 : 4;
        },
        [](Connection& conn, PeerProcess&) {
            std::uint8_t request[16];
            REQUIRE(read_exact(conn, request, sizeof request));
            CHECK(read_eof(conn));
            std::uint8_t reply[1000];
            fill_pattern(reply, sizeof reply, kParentSeed);
            REQUIRE(write_all(conn, reply, sizeof reply));
            CHECK(conn.close() == 0);
        });
}

TEST_CASE("a process that writes and exits without closing delivers every byte", "[rdma][stream]") {
    constexpr std::size_t kBytes = 2 * 1024 * 1024 + 5;
    with_peer(
        Settings{},
        [](Connection& conn) {
            if (!write_pattern(conn, kBytes, kChildSeed)) return 1;
            // Like a PostgreSQL backend after its last message: no close().
            std::exit(0);
        },
        [](Connection& conn, PeerProcess&) {
            REQUIRE(read_pattern(conn, kBytes, kChildSeed));
            CHECK(read_eof(conn));
        });
}

namespace {

// A 16-byte header, then 64 KiB messages each read and answered before the
// next: every message finds room, so only the ends of the staging ring and
// of the peer's 256 KiB RX ring could cut one. Nine cross the RX ring's end
// twice, as a plain WRITE chained before the WRITE WITH IMM on the real
// device, and the staging ring's end as two scatter/gather entries.
void one_write_with_imm_per_message(const Settings& settings) {
    static constexpr std::size_t kHeader = 16;
    static constexpr std::size_t kMessage = 64 * 1024;
    static constexpr std::size_t kMessages = 9;
    static constexpr std::size_t kTotal = kHeader + kMessages * kMessage;
    with_peer(
        settings,
        [](Connection& conn) {
            std::vector<std::uint8_t> data(kTotal);
            fill_pattern(data.data(), data.size(), kChildSeed);
            const std::uint64_t before = conn.stats().writes_posted;
            if (!write_all(conn, data.data(), kHeader)) return 1;
            for (std::size_t i = 0; i < kMessages; ++i) {
                std::uint8_t ack = 0;
                if (!write_all(conn, data.data() + kHeader + i * kMessage, kMessage) || !read_exact(conn, &ack, 1))
                    return 2;
            }
            const std::uint64_t writes = conn.stats().writes_posted - before;
            if (writes != kMessages + 1) {
                std::fprintf(stderr, "child: %llu WRITE WITH IMM for %zu messages\n",
                             static_cast<unsigned long long>(writes), kMessages + 1);
                return 3;
            }
            return conn.close() == 0 ? 0 : 4;
        },
        [](Connection& conn, PeerProcess&) {
            std::vector<std::uint8_t> in(kTotal);
            REQUIRE(read_exact(conn, in.data(), kHeader));
            for (std::size_t i = 0; i < kMessages; ++i) {
                REQUIRE(read_exact(conn, in.data() + kHeader + i * kMessage, kMessage));
                const std::uint8_t ack = 1;
                REQUIRE(write_all(conn, &ack, 1));
            }
            CHECK(check_pattern(in.data(), in.size(), kChildSeed));
            CHECK(read_eof(conn));
        });
}

}  // namespace

TEST_CASE("64 KiB messages off the rings' grid go out as one WRITE WITH IMM each, across both rings' ends",
          "[rdma][stream]") {
    one_write_with_imm_per_message(Settings{});  // 128 KiB of staging: the RX ring's end meets a staging end
}

TEST_CASE("a message across the RX ring's end gathers from both ends of staging on the real device", "[rdma][stream]") {
    // 100 KiB of staging: the RX ring's ends fall inside staging wraps, so
    // a chained write itself carries two scatter/gather entries.
    Settings settings;
    settings.tx_buffer_size = 100 * 1024;
    one_write_with_imm_per_message(settings);
}
