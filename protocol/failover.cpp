#include "protocol/failover.hpp"

#include "protocol/byte_order.hpp"

namespace pg_rdma::protocol {
namespace {

constexpr std::size_t kOffMagic = 0;
constexpr std::size_t kOffVersion = 4;
constexpr std::size_t kOffFlags = 5;
constexpr std::size_t kOffReserved = 6;
constexpr std::size_t kOffReceived = 8;
constexpr std::size_t kOffKeptFrom = 16;
constexpr std::size_t kOffSent = 24;
constexpr std::uint8_t kFlagResumable = 1u << 0;

}  // namespace

FailoverBytes encode_failover(const FailoverMessage& message) {
    FailoverBytes out{};
    std::uint8_t* p = out.data();
    put_u32(p + kOffMagic, kFailoverMagic);
    put_u8(p + kOffVersion, kFailoverVersion);
    put_u8(p + kOffFlags, message.resumable ? kFlagResumable : 0);
    put_u64(p + kOffReceived, message.received);
    put_u64(p + kOffKeptFrom, message.kept_from);
    put_u64(p + kOffSent, message.sent);
    return out;
}

bool resumable_pair(const FailoverMessage& a, const FailoverMessage& b) {
    const auto covers = [](const FailoverMessage& holder, std::uint64_t received) {
        return received >= holder.kept_from && received <= holder.sent;
    };
    return a.resumable && b.resumable && covers(a, b.received) && covers(b, a.received);
}

Decoded<FailoverMessage> decode_failover(std::span<const std::uint8_t> bytes) {
    using Result = Decoded<FailoverMessage>;
    // Judge the magic as soon as it can be: a stray byte is an error now,
    // not after 24 bytes that may never come.
    static const FailoverBytes kPrefix = encode_failover({});
    for (std::size_t i = 0; i < bytes.size() && i < kOffVersion + 1; ++i)
        if (bytes[i] != kPrefix[i]) return Result::fail("failover message: wrong magic or version");
    if (bytes.size() < kFailoverMessageSize) return Result::need_more();
    const std::uint8_t* p = bytes.data();
    const std::uint8_t flags = get_u8(p + kOffFlags);
    if ((flags & ~kFlagResumable) != 0) return Result::fail("failover message: unknown flags");
    if (get_u16(p + kOffReserved) != 0) return Result::fail("failover message: reserved bytes not zero");
    FailoverMessage m;
    m.resumable = (flags & kFlagResumable) != 0;
    m.received = get_u64(p + kOffReceived);
    m.kept_from = get_u64(p + kOffKeptFrom);
    m.sent = get_u64(p + kOffSent);
    if (m.kept_from > m.sent) return Result::fail("failover message: holds bytes beyond what was sent");
    return Result::ok(m, kFailoverMessageSize);
}

}  // namespace pg_rdma::protocol
