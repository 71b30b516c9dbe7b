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

std::vector<std::uint8_t> client_hello(const std::string& alpn_names) {
    std::vector<std::uint8_t> bytes = {0x16, 0x03, 0x01, 0x00, 0x80, 0x01, 0x00, 0x00, 0x7c, 0x03, 0x03};
    bytes.resize(60, 0x2a);
    bytes.insert(bytes.end(), alpn_names.begin(), alpn_names.end());
    return bytes;
}

}  // namespace

TEST_CASE("a StartupMessage of protocol 3.0 or 3.2 opens a session") {
    CHECK(classify_opener(header(84, 196608, 84)) == Opener::Startup);
    CHECK(classify_opener(header(84, (3u << 16) | 2u, 84)) == Opener::Startup);
    // Only the header is judged: a first write may carry less than the packet.
    CHECK(classify_opener(header(84, 196608, 8)) == Opener::Startup);
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
