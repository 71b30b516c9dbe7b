// The rdma_connect() private data that carries the nonce from the 'R' reply.
#include "testing/catch.hpp"

#include <vector>

#include "protocol/byte_order.hpp"
#include "protocol/upgrade.hpp"

using namespace pg_rdma::protocol;

namespace {

constexpr std::size_t kOffVersion = 4;
constexpr std::size_t kOffNonce = 8;
constexpr std::size_t kMaxRcPrivateData = 56;  // what rdma_cm carries for RC

Nonce pattern_nonce() {
    Nonce n{};
    for (std::size_t i = 0; i < n.size(); ++i) n[i] = static_cast<std::uint8_t>(i * 7 + 1);
    return n;
}

std::vector<std::uint8_t> padded(std::size_t size) {
    const ConnectPrivateDataBytes b = encode_connect_private_data(pattern_nonce());
    std::vector<std::uint8_t> out(b.begin(), b.end());
    out.resize(size, 0);
    return out;
}

void check_rejected(std::span<const std::uint8_t> bytes, std::string_view why) {
    const auto r = decode_connect_private_data(bytes);
    CHECK(r.status == DecodeStatus::Error);
    CHECK(r.error == why);
}

}  // namespace

TEST_CASE("private data has the documented byte layout") {
    const ConnectPrivateDataBytes b = encode_connect_private_data(pattern_nonce());
    const std::uint8_t head[] = {'P', 'G', 'R', 'C', kUpgradeVersion, 0, 0, 0};
    CHECK(std::equal(std::begin(head), std::end(head), b.begin()));
    CHECK(std::equal(b.begin() + kOffNonce, b.end(), pattern_nonce().begin()));
    static_assert(kConnectPrivateDataSize <= kMaxRcPrivateData);
}

TEST_CASE("private data round-trips the nonce") {
    const auto r = decode_connect_private_data(encode_connect_private_data(pattern_nonce()));
    REQUIRE(r.status == DecodeStatus::Ok);
    CHECK(r.value == pattern_nonce());
    CHECK(r.consumed == kConnectPrivateDataSize);
}

TEST_CASE("private data zero-padded by the transport is accepted whole") {
    const auto bytes = padded(kMaxRcPrivateData);
    const auto r = decode_connect_private_data(bytes);
    REQUIRE(r.status == DecodeStatus::Ok);
    CHECK(r.value == pattern_nonce());
    CHECK(r.consumed == kMaxRcPrivateData);
}

TEST_CASE("short private data is never accepted") {
    const auto bytes = padded(kConnectPrivateDataSize);
    for (std::size_t n = 0; n < kConnectPrivateDataSize; ++n) {
        INFO("cut to " << n << " bytes");
        CHECK(decode_connect_private_data(std::span(bytes).first(n)).status == DecodeStatus::NeedMore);
    }
}

TEST_CASE("private data with a wrong magic is an error") {
    for (std::size_t i = 0; i < 4; ++i) {
        INFO("magic byte " << i);
        auto bytes = padded(kConnectPrivateDataSize);
        bytes[i] = static_cast<std::uint8_t>(bytes[i] ^ 0x01);
        check_rejected(bytes, "connect private data: bad magic");
    }
    auto zero = padded(kConnectPrivateDataSize);
    put_u32(zero.data(), 0);
    check_rejected(zero, "connect private data: bad magic");
}

TEST_CASE("private data with another handshake version is an error") {
    auto bytes = padded(kConnectPrivateDataSize);
    bytes[kOffVersion] = kUpgradeVersion + 1;
    check_rejected(bytes, "connect private data: unsupported version");
    bytes[kOffVersion] = 0;
    check_rejected(bytes, "connect private data: unsupported version");
}

TEST_CASE("private data with a reserved byte set is an error") {
    for (std::size_t i = kOffVersion + 1; i < kOffNonce; ++i) {
        INFO("reserved byte " << i);
        auto bytes = padded(kConnectPrivateDataSize);
        bytes[i] = 1;
        check_rejected(bytes, "connect private data: reserved bytes not zero");
    }
}

TEST_CASE("private data with nonzero padding is an error") {
    for (std::size_t i = kConnectPrivateDataSize; i < kMaxRcPrivateData; ++i) {
        INFO("padding byte " << i);
        auto bytes = padded(kMaxRcPrivateData);
        bytes[i] = 1;
        check_rejected(bytes, "connect private data: padding not zero");
    }
}
