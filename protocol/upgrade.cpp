// The upgrade handshake on the TCP connection: the request, the server's
// reply and the rdma_connect() private data. Layouts are in upgrade.hpp.
//
// Only classify_first_packet runs on bytes nobody has vetted yet (the first
// packet of any PostgreSQL session), so it never fails: whatever is not our
// request is handed to PostgreSQL untouched.
#include "protocol/upgrade.hpp"

#include <algorithm>

#include "protocol/byte_order.hpp"
#include "protocol/probe.hpp"

namespace pg_rdma::protocol {
namespace {

// Request.
constexpr std::size_t kOffRequestLength = 0;
constexpr std::size_t kOffRequestCode = 4;

// 'R' accept.
constexpr std::size_t kOffKind = 0;
constexpr std::size_t kOffVersion = 1;
constexpr std::size_t kOffFamily = 2;
constexpr std::size_t kOffReserved = 3;
constexpr std::size_t kOffPort = 4;
constexpr std::size_t kOffBudget = 6;
constexpr std::size_t kOffAddress = 8;
constexpr std::size_t kOffNonce = 24;
static_assert(kOffNonce + kNonceSize == kUpgradeAcceptSize);

constexpr std::uint8_t kFamilyIpv4 = 4;
constexpr std::uint8_t kFamilyIpv6 = 6;
constexpr std::size_t kIpv4AddressSize = 4;   // bytes
constexpr std::size_t kIpv6AddressSize = 16;  // bytes
static_assert(kOffAddress + kIpv6AddressSize == kOffNonce);

// 'N' is complete in one byte; 'E' leaves its ErrorResponse to the caller.
constexpr std::size_t kDeclineSize = 1;
constexpr std::size_t kErrorConsumed = 0;

// Connect private data.
constexpr std::size_t kOffMagic = 0;
constexpr std::size_t kOffPdVersion = 4;
constexpr std::size_t kOffPdReserved = 5;
constexpr std::size_t kOffPdNonce = 8;
static_assert(kOffPdNonce + kNonceSize == kConnectPrivateDataSize);

constexpr std::size_t address_size(std::uint8_t family) {
    return family == kFamilyIpv4 ? kIpv4AddressSize : kIpv6AddressSize;
}

using ReplyResult = Decoded<UpgradeReply>;

ReplyResult decode_accept(std::span<const std::uint8_t> bytes) {
    if (bytes.size() < kUpgradeAcceptSize) return ReplyResult::need_more();
    const std::uint8_t* p = bytes.data();
    if (get_u8(p + kOffVersion) != kUpgradeVersion)
        return ReplyResult::fail("upgrade reply: unsupported version");
    const std::uint8_t family = get_u8(p + kOffFamily);
    if (family != kFamilyIpv4 && family != kFamilyIpv6)
        return ReplyResult::fail("upgrade reply: unknown address family");
    if (get_u8(p + kOffReserved) != 0)
        return ReplyResult::fail("upgrade reply: reserved bytes not zero");
    // An IPv4 address with garbage after it would be read differently by a
    // later version that widened it; insist on zeros now.
    if (!all_zero(p, kOffAddress + address_size(family), kOffNonce))
        return ReplyResult::fail("upgrade reply: IPv4 address padding not zero");
    const std::uint16_t port = get_u16(p + kOffPort);
    if (port == 0) return ReplyResult::fail("upgrade reply: port is 0");
    UpgradeReply reply{ReplyKind::Accept, {}};
    reply.endpoint.family = family;
    reply.endpoint.port = port;
    reply.endpoint.setup_budget = get_u16(p + kOffBudget);
    std::copy_n(p + kOffAddress, kIpv6AddressSize, reply.endpoint.address.begin());
    std::copy_n(p + kOffNonce, kNonceSize, reply.endpoint.nonce.begin());
    return ReplyResult::ok(reply, kUpgradeAcceptSize);
}

}  // namespace

UpgradeRequestBytes encode_upgrade_request() {
    UpgradeRequestBytes out{};
    put_u32(out.data() + kOffRequestLength, kUpgradeRequestLength);
    put_u32(out.data() + kOffRequestCode, kUpgradeRequestCode);
    return out;
}

Decoded<FirstPacket> classify_first_packet(std::span<const std::uint8_t> bytes) {
    // The two requests differ only in their last byte.
    static const UpgradeRequestBytes kRequest = encode_upgrade_request();
    static const UpgradeRequestBytes kProbe = encode_probe_request();
    const std::size_t seen = std::min(bytes.size(), kRequest.size());
    const auto begin = bytes.begin();
    const auto end = bytes.begin() + static_cast<std::ptrdiff_t>(seen);
    const bool upgrade = std::equal(begin, end, kRequest.begin());
    const bool probe = std::equal(begin, end, kProbe.begin());
    if (!upgrade && !probe) return Decoded<FirstPacket>::ok(FirstPacket::Other, 0);
    if (seen < kRequest.size()) return Decoded<FirstPacket>::need_more();
    return Decoded<FirstPacket>::ok(upgrade ? FirstPacket::Upgrade : FirstPacket::Probe, kRequest.size());
}

bool is_cancel_request(std::span<const std::uint8_t> bytes) {
    if (bytes.size() < 8) return false;
    const std::uint32_t length = get_u32(bytes.data());
    return get_u32(bytes.data() + 4) == kCancelRequestCode && length >= kCancelRequestMinLength &&
           length <= kCancelRequestMaxLength;
}

UpgradeAcceptBytes encode_upgrade_accept(const RdmaEndpoint& endpoint) {
    UpgradeAcceptBytes out{};  // reserved bytes and IPv4 padding stay zero
    std::uint8_t* p = out.data();
    put_u8(p + kOffKind, kReplyAccept);
    put_u8(p + kOffVersion, kUpgradeVersion);
    put_u8(p + kOffFamily, endpoint.family);
    put_u16(p + kOffPort, endpoint.port);
    put_u16(p + kOffBudget, endpoint.setup_budget);
    std::copy_n(endpoint.address.begin(), address_size(endpoint.family), p + kOffAddress);
    std::copy_n(endpoint.nonce.begin(), kNonceSize, p + kOffNonce);
    return out;
}

Decoded<UpgradeReply> decode_upgrade_reply(std::span<const std::uint8_t> bytes) {
    if (bytes.empty()) return ReplyResult::need_more();
    switch (bytes[0]) {
        case kReplyAccept: return decode_accept(bytes);
        case kReplyDecline: return ReplyResult::ok({ReplyKind::Decline, {}}, kDeclineSize);
        case kReplyError: return ReplyResult::ok({ReplyKind::ServerLacksRdma, {}}, kErrorConsumed);
        default: return ReplyResult::fail("upgrade reply: unknown reply type");
    }
}

std::uint16_t encode_setup_budget(std::uint64_t budget_ms) {
    constexpr std::uint64_t kMaxUnits = 0xFFFF;
    if (budget_ms == 0) return 0;
    const std::uint64_t units = std::max<std::uint64_t>(budget_ms / kSetupBudgetUnitMs, 1);
    return static_cast<std::uint16_t>(std::min(units, kMaxUnits));
}

std::uint64_t setup_budget_ms(std::uint16_t units) { return std::uint64_t{units} * kSetupBudgetUnitMs; }

ConnectPrivateDataBytes encode_connect_private_data(const Nonce& nonce) {
    ConnectPrivateDataBytes out{};
    put_u32(out.data() + kOffMagic, kConnectMagic);
    put_u8(out.data() + kOffPdVersion, kUpgradeVersion);
    std::copy_n(nonce.begin(), kNonceSize, out.data() + kOffPdNonce);
    return out;
}

// Private data arrives whole with the connect request, so a caller treats
// NeedMore (too short) as a reject. Trailing padding counts as consumed.
Decoded<Nonce> decode_connect_private_data(std::span<const std::uint8_t> bytes) {
    using Result = Decoded<Nonce>;
    if (bytes.size() < kConnectPrivateDataSize) return Result::need_more();
    const std::uint8_t* p = bytes.data();
    if (get_u32(p + kOffMagic) != kConnectMagic) return Result::fail("connect private data: bad magic");
    if (get_u8(p + kOffPdVersion) != kUpgradeVersion)
        return Result::fail("connect private data: unsupported version");
    if (!all_zero(p, kOffPdReserved, kOffPdNonce))
        return Result::fail("connect private data: reserved bytes not zero");
    if (!all_zero(p, kConnectPrivateDataSize, bytes.size()))
        return Result::fail("connect private data: padding not zero");
    Nonce nonce{};
    std::copy_n(p + kOffPdNonce, kNonceSize, nonce.begin());
    return Result::ok(nonce, bytes.size());
}

}  // namespace pg_rdma::protocol
