// Client side: the server's answer to the upgrade request — an RDMA endpoint
// ('R'), a decline ('N') or an ErrorResponse from a server without pg_rdma.
#include "testing/catch.hpp"

#include <vector>

#include "protocol/byte_order.hpp"
#include "protocol/upgrade.hpp"

using namespace pg_rdma::protocol;

namespace {

// Offsets in the 'R' reply (upgrade.hpp).
constexpr std::size_t kOffVersion = 1;
constexpr std::size_t kOffFamily = 2;
constexpr std::size_t kOffReserved = 3;
constexpr std::size_t kOffPort = 4;
constexpr std::size_t kOffBudget = 6;
constexpr std::size_t kOffIpv4Padding = 12;
constexpr std::size_t kOffNonce = 24;

Nonce counting_nonce() {
    Nonce n{};
    for (std::size_t i = 0; i < n.size(); ++i) n[i] = static_cast<std::uint8_t>(0xA0 + i);
    return n;
}

RdmaEndpoint ipv4_endpoint() {
    RdmaEndpoint e;
    e.family = 4;
    e.address = {192, 168, 7, 21};
    e.port = 0x4A38;  // 19000
    e.nonce = counting_nonce();
    return e;
}

RdmaEndpoint ipv6_endpoint() {
    RdmaEndpoint e;
    e.family = 6;
    e.address = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};
    e.port = 65535;
    e.nonce = counting_nonce();
    return e;
}

void check_rejected(const UpgradeAcceptBytes& bytes, std::string_view why) {
    const auto r = decode_upgrade_reply(bytes);
    CHECK(r.status == DecodeStatus::Error);
    CHECK(r.consumed == 0);
    CHECK(r.error == why);
}

}  // namespace

TEST_CASE("an IPv4 accept has the documented byte layout") {
    const UpgradeAcceptBytes b = encode_upgrade_accept(ipv4_endpoint());
    const std::uint8_t head[] = {'R', 1, 4, 0, 0x4A, 0x38, 0, 0, 192, 168, 7, 21};
    CHECK(std::equal(std::begin(head), std::end(head), b.begin()));
    for (std::size_t i = kOffIpv4Padding; i < kOffNonce; ++i) CHECK(b[i] == 0);
    CHECK(std::equal(b.begin() + kOffNonce, b.end(), counting_nonce().begin()));
}

TEST_CASE("an IPv4 accept decodes to the endpoint it was made from") {
    const auto r = decode_upgrade_reply(encode_upgrade_accept(ipv4_endpoint()));
    REQUIRE(r.status == DecodeStatus::Ok);
    CHECK(r.consumed == kUpgradeAcceptSize);
    CHECK(r.value.kind == ReplyKind::Accept);
    CHECK(r.value.endpoint == ipv4_endpoint());
}

TEST_CASE("an IPv6 accept decodes to the endpoint it was made from") {
    const auto r = decode_upgrade_reply(encode_upgrade_accept(ipv6_endpoint()));
    REQUIRE(r.status == DecodeStatus::Ok);
    CHECK(r.consumed == kUpgradeAcceptSize);
    CHECK(r.value.endpoint == ipv6_endpoint());
}

TEST_CASE("the IPv4 encoder ignores address bytes past the fourth") {
    RdmaEndpoint e = ipv4_endpoint();
    e.address[4] = 0xff;
    e.address[15] = 0xff;
    const auto r = decode_upgrade_reply(encode_upgrade_accept(e));
    REQUIRE(r.status == DecodeStatus::Ok);
    CHECK(r.value.endpoint == ipv4_endpoint());
}

TEST_CASE("an accept followed by more bytes consumes only the accept") {
    const UpgradeAcceptBytes b = encode_upgrade_accept(ipv6_endpoint());
    std::vector<std::uint8_t> bytes(b.begin(), b.end());
    bytes.push_back('N');
    CHECK(decode_upgrade_reply(bytes).consumed == kUpgradeAcceptSize);
}

TEST_CASE("nothing yet, or an accept cut short, asks for more bytes") {
    CHECK(decode_upgrade_reply({}).status == DecodeStatus::NeedMore);
    const UpgradeAcceptBytes b = encode_upgrade_accept(ipv4_endpoint());
    for (std::size_t n = 1; n < kUpgradeAcceptSize; ++n) {
        INFO("cut to " << n << " bytes");
        const auto r = decode_upgrade_reply(std::span(b).first(n));
        CHECK(r.status == DecodeStatus::NeedMore);
        CHECK(r.consumed == 0);
    }
}

TEST_CASE("a decline is one byte and the session goes on over TCP") {
    const std::uint8_t bytes[] = {'N', 0, 0, 0, 8, 4, 0xD2, 0x16, 0x2F};  // 'N' then an SSLRequest
    const auto r = decode_upgrade_reply(bytes);
    REQUIRE(r.status == DecodeStatus::Ok);
    CHECK(r.value.kind == ReplyKind::Decline);
    CHECK(r.consumed == 1);
    CHECK(decode_upgrade_reply(std::span(bytes).first(1)).consumed == 1);
}

TEST_CASE("an ErrorResponse means the server lacks pg_rdma and is left unread") {
    const std::uint8_t bytes[] = {'E', 0, 0, 0, 10, 'S', 'F', 'A', 'T', 'A', 'L', 0, 0};
    const auto r = decode_upgrade_reply(bytes);
    REQUIRE(r.status == DecodeStatus::Ok);
    CHECK(r.value.kind == ReplyKind::ServerLacksRdma);
    CHECK(r.consumed == 0);
    CHECK(decode_upgrade_reply(std::span(bytes).first(1)).value.kind == ReplyKind::ServerLacksRdma);
}

TEST_CASE("an unknown first byte is an error") {
    for (const std::uint8_t first : {std::uint8_t{0}, std::uint8_t{'S'}, std::uint8_t{'r'}, std::uint8_t{0xff}}) {
        INFO("first byte " << int{first});
        const std::uint8_t bytes[] = {first};
        const auto r = decode_upgrade_reply(bytes);
        CHECK(r.status == DecodeStatus::Error);
        CHECK(r.error == "upgrade reply: unknown reply type");
    }
}

TEST_CASE("an accept with another handshake version is an error") {
    for (const std::uint8_t v : {std::uint8_t{0}, std::uint8_t{kUpgradeVersion + 1}, std::uint8_t{0xff}}) {
        UpgradeAcceptBytes b = encode_upgrade_accept(ipv4_endpoint());
        b[kOffVersion] = v;
        check_rejected(b, "upgrade reply: unsupported version");
    }
}

TEST_CASE("an accept with an unknown address family is an error") {
    for (const std::uint8_t family : {std::uint8_t{0}, std::uint8_t{2}, std::uint8_t{5}, std::uint8_t{10},
                                      std::uint8_t{0xff}}) {
        INFO("family " << int{family});
        UpgradeAcceptBytes b = encode_upgrade_accept(ipv6_endpoint());
        b[kOffFamily] = family;
        check_rejected(b, "upgrade reply: unknown address family");
    }
}

TEST_CASE("an accept with port 0 is an error") {
    UpgradeAcceptBytes b = encode_upgrade_accept(ipv4_endpoint());
    put_u16(b.data() + kOffPort, 0);
    check_rejected(b, "upgrade reply: port is 0");
}

TEST_CASE("an accept with its reserved byte set is an error") {
    UpgradeAcceptBytes b = encode_upgrade_accept(ipv4_endpoint());
    b[kOffReserved] = 1;
    check_rejected(b, "upgrade reply: reserved bytes not zero");
}

TEST_CASE("an accept carries the server's setup budget at bytes 6-7") {
    RdmaEndpoint e = ipv4_endpoint();
    e.setup_budget = encode_setup_budget(2'500);  // ms
    const UpgradeAcceptBytes b = encode_upgrade_accept(e);
    CHECK(get_u16(b.data() + kOffBudget) == 25);
    const auto r = decode_upgrade_reply(b);
    REQUIRE(r.is_ok());
    CHECK(r.value.endpoint.setup_budget == 25);
    CHECK(setup_budget_ms(r.value.endpoint.setup_budget) == 2'500);
}

TEST_CASE("a setup budget is rounded down, kept above zero and capped") {
    CHECK(encode_setup_budget(0) == 0);       // not said
    CHECK(encode_setup_budget(1) == 1);       // any budget is at least one unit
    CHECK(encode_setup_budget(199) == 1);
    CHECK(encode_setup_budget(10'000) == 100);
    CHECK(encode_setup_budget(3'600'000'000ULL) == 0xFFFF);
    CHECK(setup_budget_ms(0) == 0);
}

TEST_CASE("an IPv4 accept with any padding byte set is an error") {
    for (std::size_t i = kOffIpv4Padding; i < kOffNonce; ++i) {
        INFO("padding byte " << i);
        UpgradeAcceptBytes b = encode_upgrade_accept(ipv4_endpoint());
        b[i] = 0x80;
        check_rejected(b, "upgrade reply: IPv4 address padding not zero");
    }
}

TEST_CASE("in an IPv6 accept those bytes are address") {
    RdmaEndpoint e = ipv6_endpoint();
    e.address.fill(0xff);
    const auto r = decode_upgrade_reply(encode_upgrade_accept(e));
    REQUIRE(r.status == DecodeStatus::Ok);
    CHECK(r.value.endpoint.address == e.address);
}
