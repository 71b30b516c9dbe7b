// Which first packets open a PostgreSQL session (the client's first-write path).
#include "testing/catch.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/byte_order.hpp"
#include "protocol/session_opener.hpp"
#include "protocol/upgrade.hpp"

using namespace pg_rdma::protocol;

namespace {

std::vector<std::uint8_t> header(std::uint32_t length, std::uint32_t code, std::size_t total) {
    std::vector<std::uint8_t> bytes(total, 0);
    put_u32(bytes.data(), length);
    put_u32(bytes.data() + 4, code);
    return bytes;
}

std::vector<std::uint8_t> startup(std::uint32_t version, const std::string& pairs) {
    std::vector<std::uint8_t> bytes = header(static_cast<std::uint32_t>(8 + pairs.size()), version, 8);
    bytes.insert(bytes.end(), pairs.begin(), pairs.end());
    return bytes;
}

std::vector<std::uint8_t> client_hello(const std::string& alpn_names) {
    std::vector<std::uint8_t> bytes = {0x16, 0x03, 0x01, 0x00, 0x80, 0x01, 0x00, 0x00, 0x7c, 0x03, 0x03};
    bytes.resize(60, 0x2a);
    bytes.insert(bytes.end(), alpn_names.begin(), alpn_names.end());
    return bytes;
}

}  // namespace

TEST_CASE("a StartupMessage of protocol 3.0 or 3.2 opens a session") {
    const std::string pairs("user\0app\0database\0db\0\0", 22);
    CHECK(classify_opener(startup(196608, pairs)) == Opener::Startup);
    CHECK(classify_opener(startup((3u << 16) | 2u, pairs)) == Opener::Startup);
    // A first write that carries only the start: judged by its header.
    CHECK(classify_opener(header(84, 196608, 8)) == Opener::Startup);
    CHECK(classify_opener(header(84, 196608, 40)) == Opener::Startup);
}

TEST_CASE("a whole packet whose header reads 3.x but whose body is not a StartupMessage's does not") {
    // A Kafka Metadata request: api_key 3, api_version 9, correlation id, client id...
    std::vector<std::uint8_t> kafka = header(30, (3u << 16) | 9u, 34);
    CHECK(classify_opener(kafka) == Opener::None);
    CHECK(classify_opener(startup(196608, std::string("database\0db\0\0", 13))) == Opener::None);  // no user
    CHECK(classify_opener(startup(196608, std::string("user\0app\0", 9))) == Opener::None);  // no final NUL
    CHECK(classify_opener(startup(196608, std::string("user\0app", 8))) == Opener::None);
    CHECK(classify_opener(startup((3u << 16) | 16u, std::string("user\0app\0\0", 10))) == Opener::None);
}

TEST_CASE("SSLRequest and GSSENCRequest open a session") {
    CHECK(classify_opener(header(8, kSslRequestCode, 8)) == Opener::SslRequest);
    CHECK(classify_opener(header(8, kGssEncRequestCode, 8)) == Opener::GssEncRequest);
}

TEST_CASE("a CancelRequest does not: it stays on TCP") {
    CHECK(classify_opener(header(16, kCancelRequestCode, 16)) == Opener::None);
}

TEST_CASE("a direct-SSL ClientHello opens a session only when its ALPN offers postgresql") {
    CHECK(classify_opener(client_hello(std::string("\x02h2\x08http/1.1\x0apostgresql", 23))) == Opener::DirectSsl);
    CHECK(classify_opener(client_hello(std::string("\x02h2\x08http/1.1", 12))) == Opener::None);
}

TEST_CASE("anything else does not: short writes, other protocols, protocol 2, lengths out of range") {
    CHECK(classify_opener(header(84, 196608, 7)) == Opener::None);
    const std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    CHECK(classify_opener({reinterpret_cast<const std::uint8_t*>(http.data()), http.size()}) == Opener::None);
    CHECK(classify_opener(header(84, 2u << 16, 84)) == Opener::None);
    CHECK(classify_opener(header(7, 196608, 8)) == Opener::None);
    CHECK(classify_opener(header(10001, 196608, 64)) == Opener::None);
    CHECK(classify_opener(header(9, kSslRequestCode, 9)) == Opener::None);
    std::vector<std::uint8_t> not_tls = client_hello(std::string("\x0apostgresql", 11));
    not_tls[1] = 0x02;
    CHECK(classify_opener(not_tls) == Opener::None);
}

TEST_CASE("a relay knows how long the first message is once its header is in") {
    // Too short to tell.
    CHECK(opener_length(std::vector<std::uint8_t>{0, 0, 0}) == 0);
    CHECK(opener_length(std::vector<std::uint8_t>{0x16, 0x03, 0x01}) == 0);
    // PostgreSQL's openers: their length.
    CHECK(opener_length(header(8, kSslRequestCode, 8)) == 8);
    CHECK(opener_length(startup(3u << 16, std::string("user\0app\0\0", 10))) == 18);
    CHECK(opener_length(header(40, 3u << 16, 8)) == 40);
    // A TLS record: its header and payload, the payload capped.
    CHECK(opener_length(std::vector<std::uint8_t>{0x16, 0x03, 0x01, 0x05, 0x00}) == 5 + 0x500);
    CHECK(opener_length(std::vector<std::uint8_t>{0x16, 0x03, 0x01, 0xff, 0xff}) == kMaxOpenerLength);
    // Anything else: its header alone (the library leaves it on TCP).
    CHECK(opener_length(header(200000, 3u << 16, 8)) == 8);
    CHECK(opener_length(std::vector<std::uint8_t>{'G', 'E', 'T', ' ', '/', ' ', 'H', 'T'}) == 8);
}
