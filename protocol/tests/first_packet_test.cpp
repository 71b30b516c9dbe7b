// Server side: the first bytes of a session are our upgrade request, a prefix
// of it, or PostgreSQL's business — never an error.
#include "testing/catch.hpp"

#include <vector>

#include "protocol/byte_order.hpp"
#include "protocol/upgrade.hpp"

using namespace pg_rdma::protocol;

namespace {

// PostgreSQL's own first packets (src/include/libpq/pqcomm.h).
static_assert(kCancelRequestCode == 80877102);
constexpr std::uint32_t kSslRequestCode = 80877103;
constexpr std::uint32_t kGssEncRequestCode = 80877104;
constexpr std::uint32_t kProtocol30 = 0x00030000;

std::vector<std::uint8_t> packet(std::uint32_t length, std::uint32_t code) {
    std::vector<std::uint8_t> p(length, 0);
    put_u32(p.data(), length);
    put_u32(p.data() + 4, code);
    return p;
}

std::vector<std::uint8_t> startup_packet() {
    const char params[] = "user\0postgres\0database\0postgres\0";  // the final \0 ends the list
    std::vector<std::uint8_t> p = packet(8, kProtocol30);
    p.insert(p.end(), params, params + sizeof params);
    put_u32(p.data(), static_cast<std::uint32_t>(p.size()));
    return p;
}

void check_other(std::span<const std::uint8_t> bytes) {
    const auto r = classify_first_packet(bytes);
    CHECK(r.status == DecodeStatus::Ok);
    CHECK(r.value == FirstPacket::Other);
    CHECK(r.consumed == 0);
}

}  // namespace

TEST_CASE("the upgrade request is 8 bytes: length 8 and the code RDMA") {
    const UpgradeRequestBytes expected{0, 0, 0, 8, 'R', 'D', 'M', 'A'};
    CHECK(encode_upgrade_request() == expected);
}

TEST_CASE("exactly the upgrade request is recognised and consumed") {
    const auto r = classify_first_packet(encode_upgrade_request());
    CHECK(r.status == DecodeStatus::Ok);
    CHECK(r.value == FirstPacket::Upgrade);
    CHECK(r.consumed == kUpgradeRequestLength);
}

TEST_CASE("bytes after the request are left for the next read") {
    const UpgradeRequestBytes request = encode_upgrade_request();
    std::vector<std::uint8_t> bytes(request.begin(), request.end());
    const auto ssl = packet(8, kSslRequestCode);
    bytes.insert(bytes.end(), ssl.begin(), ssl.end());
    const auto r = classify_first_packet(bytes);
    CHECK(r.value == FirstPacket::Upgrade);
    CHECK(r.consumed == kUpgradeRequestLength);
}

TEST_CASE("every proper prefix of the request asks for more bytes") {
    const UpgradeRequestBytes request = encode_upgrade_request();
    for (std::size_t n = 0; n < request.size(); ++n) {
        INFO("prefix of " << n << " bytes");
        const auto r = classify_first_packet(std::span(request).first(n));
        CHECK(r.status == DecodeStatus::NeedMore);
        CHECK(r.consumed == 0);
    }
}

TEST_CASE("one differing byte anywhere makes it someone else's packet") {
    const UpgradeRequestBytes request = encode_upgrade_request();
    for (std::size_t i = 0; i < request.size(); ++i) {
        INFO("byte " << i << " changed");
        UpgradeRequestBytes changed = request;
        changed[i] = static_cast<std::uint8_t>(changed[i] ^ 0x20);
        check_other(changed);
        check_other(std::span(changed).first(i + 1));  // known as soon as that byte arrives
    }
}

TEST_CASE("SSLRequest is passed to PostgreSQL") {
    const auto ssl = packet(8, kSslRequestCode);
    check_other(ssl);
    // Its length word matches ours, so only the code tells them apart.
    CHECK(classify_first_packet(std::span(ssl).first(4)).status == DecodeStatus::NeedMore);
    check_other(std::span(ssl).first(5));
}

TEST_CASE("GSSENCRequest is passed to PostgreSQL") { check_other(packet(8, kGssEncRequestCode)); }

TEST_CASE("CancelRequest is passed to PostgreSQL") {
    const auto cancel = packet(16, kCancelRequestCode);
    check_other(cancel);
    check_other(std::span(cancel).first(4));
}

TEST_CASE("a CancelRequest is recognised with a 4-byte key and with protocol 3.2's keys up to 256 bytes") {
    for (std::uint32_t key_bytes : {4u, 32u, 256u}) {
        INFO(key_bytes);
        const auto cancel = packet(12 + key_bytes, kCancelRequestCode);
        CHECK(is_cancel_request(cancel));
        CHECK(is_cancel_request(std::span(cancel).first(8)));  // the first 8 bytes say it
        check_other(cancel);
    }
}

TEST_CASE("no other first packet is taken for a CancelRequest") {
    CHECK_FALSE(is_cancel_request(packet(16, kCancelRequestCode - 1)));
    CHECK_FALSE(is_cancel_request(packet(15, kCancelRequestCode)));        // no room for a key
    CHECK_FALSE(is_cancel_request(packet(12 + 257, kCancelRequestCode)));  // a key longer than 3.2 allows
    const auto cancel = packet(16, kCancelRequestCode);
    CHECK_FALSE(is_cancel_request(std::span(cancel).first(7)));
    CHECK_FALSE(is_cancel_request(packet(8, kSslRequestCode)));
    CHECK_FALSE(is_cancel_request(startup_packet()));
    CHECK_FALSE(is_cancel_request(encode_upgrade_request()));
}

TEST_CASE("a direct-SSL first packet (a TLS ClientHello) is passed to PostgreSQL at its first byte") {
    // A TLS 1.2+ record header: handshake (22), version 3.1, length; then ClientHello (1).
    const std::uint8_t hello[] = {kTlsHandshakeRecord, 3, 1, 0, 200, 1, 0, 0, 196};
    check_other(hello);
    check_other(std::span(hello).first(1));
    CHECK_FALSE(is_cancel_request(hello));
}

TEST_CASE("a protocol 3.0 startup packet is passed to PostgreSQL") {
    const auto startup = startup_packet();
    check_other(startup);
    const auto r = classify_first_packet(std::span(startup).first(3));  // length < 256: 00 00 00 ..
    CHECK(r.status == DecodeStatus::NeedMore);
}

TEST_CASE("garbage is passed to PostgreSQL, never an error") {
    for (int first = 1; first < 256; ++first) {
        const std::uint8_t bytes[] = {static_cast<std::uint8_t>(first), 0, 0, 8};
        check_other(bytes);
    }
}
