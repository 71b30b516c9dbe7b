// Encoding and decoding of the 32-byte control messages; the byte layout is
// documented once, in control.hpp, and the offsets below follow it.
//
// The decoder treats every byte as hostile: it checks the length before
// reading, rejects unknown opcodes and versions, insists that reserved bytes
// are zero, and range-checks every value the transport will later size or
// address memory with. It never throws and never allocates.
#include "protocol/control.hpp"

#include <limits>

#include "protocol/byte_order.hpp"
#include "protocol/negotiation.hpp"

namespace pg_rdma::protocol {
namespace {

// ---- byte offsets (see control.hpp) -----------------------------------------

// Common header.
constexpr std::size_t kOffOpcode = 0;
constexpr std::size_t kOffVersion = 2;
constexpr std::size_t kOffFlags = 3;
constexpr std::size_t kHeaderEnd = 4;

// GetServerFeature / SetClientFeature.
constexpr std::size_t kOffMinVersion = 4;  // chosen version in SetClientFeature
constexpr std::size_t kOffMaxVersion = 5;  // NegotiationStatus in SetClientFeature
constexpr std::size_t kOffCredits = 6;
constexpr std::size_t kOffFeatures = 8;
constexpr std::size_t kOffRxBufferSize = 16;
constexpr std::size_t kOffKeepaliveInterval = 20;
constexpr std::size_t kOffKeepaliveTimeout = 24;
constexpr std::size_t kFeatureEnd = 28;

// RegisterXferMemory.
constexpr std::size_t kOffRkey = 4;
constexpr std::size_t kOffAddr = 8;
constexpr std::size_t kOffLength = 16;
constexpr std::size_t kXferEnd = 20;

// CreditUpdate.
constexpr std::size_t kOffCreditsGranted = 4;
constexpr std::size_t kOffRxConsumed = 8;
constexpr std::size_t kCreditEnd = 16;

// Close: bytes 4..7 are reserved too.
constexpr std::size_t kOffBytesSent = 8;
constexpr std::size_t kOffCloseRxConsumed = 16;
constexpr std::size_t kCloseEnd = 24;

static_assert(kFeatureEnd + 4 == kControlMessageSize, "feature messages end with a reserved u32");
static_assert(kXferEnd <= kControlMessageSize && kCreditEnd <= kControlMessageSize);

constexpr std::uint8_t kLastStatus = static_cast<std::uint8_t>(NegotiationStatus::BadParameters);

// ---- encoding -----------------------------------------------------------------

// FeatureOffer and FeatureAgreement share everything after byte 6.
template <class M>
void put_feature_fields(std::uint8_t* p, const M& m) {
    put_u16(p + kOffCredits, m.credits);
    put_u64(p + kOffFeatures, m.features);
    put_u32(p + kOffRxBufferSize, m.rx_buffer_size);
    put_u32(p + kOffKeepaliveInterval, m.keepalive_interval_ms);
    put_u32(p + kOffKeepaliveTimeout, m.keepalive_timeout_ms);
}

// Each overload writes the body of one message and names its opcode.
Opcode put_body(std::uint8_t* p, const FeatureOffer& m) {
    put_u8(p + kOffMinVersion, m.min_version);
    put_u8(p + kOffMaxVersion, m.max_version);
    put_feature_fields(p, m);
    return Opcode::GetServerFeature;
}

Opcode put_body(std::uint8_t* p, const FeatureAgreement& m) {
    put_u8(p + kOffMinVersion, m.version);
    put_u8(p + kOffMaxVersion, static_cast<std::uint8_t>(m.status));
    put_feature_fields(p, m);
    return Opcode::SetClientFeature;
}

Opcode put_body(std::uint8_t*, const Keepalive&) { return Opcode::Keepalive; }

Opcode put_body(std::uint8_t* p, const XferMemory& m) {
    put_u32(p + kOffRkey, m.rkey);
    put_u64(p + kOffAddr, m.addr);
    put_u32(p + kOffLength, m.length);
    return Opcode::RegisterXferMemory;
}

Opcode put_body(std::uint8_t* p, const CreditUpdate& m) {
    put_u32(p + kOffCreditsGranted, m.credits_granted);
    put_u64(p + kOffRxConsumed, m.rx_consumed);
    return Opcode::CreditUpdate;
}

Opcode put_body(std::uint8_t* p, const CloseMessage& m) {
    put_u64(p + kOffBytesSent, m.bytes_sent);
    put_u64(p + kOffCloseRxConsumed, m.rx_consumed);
    return Opcode::Close;
}

// ---- decoding -----------------------------------------------------------------

using Result = Decoded<ControlMessage>;

constexpr std::string_view kReservedSet = "control message: reserved bytes not zero";

Result ok(ControlMessage m) { return Result::ok(m, kControlMessageSize); }

template <class M>
void get_feature_fields(const std::uint8_t* p, M& m) {
    m.credits = get_u16(p + kOffCredits);
    m.features = get_u64(p + kOffFeatures);
    m.rx_buffer_size = get_u32(p + kOffRxBufferSize);
    m.keepalive_interval_ms = get_u32(p + kOffKeepaliveInterval);
    m.keepalive_timeout_ms = get_u32(p + kOffKeepaliveTimeout);
}

Result decode_offer(const std::uint8_t* p) {
    if (!all_zero(p, kFeatureEnd, kControlMessageSize)) return Result::fail(kReservedSet);
    FeatureOffer m;
    m.min_version = get_u8(p + kOffMinVersion);
    m.max_version = get_u8(p + kOffMaxVersion);
    get_feature_fields(p, m);
    if (const auto why = validate_offer(m); !why.empty()) return Result::fail(why);
    return ok(m);
}

// A refusal carries the server's own settings for the client's log, so only an
// Ok answer, whose values the client is about to use, is range-checked.
Result decode_agreement(const std::uint8_t* p) {
    if (!all_zero(p, kFeatureEnd, kControlMessageSize)) return Result::fail(kReservedSet);
    const std::uint8_t status = get_u8(p + kOffMaxVersion);
    if (status > kLastStatus) return Result::fail("control message: unknown negotiation status");
    FeatureAgreement m;
    m.version = get_u8(p + kOffMinVersion);
    m.status = static_cast<NegotiationStatus>(status);
    get_feature_fields(p, m);
    if (m.status != NegotiationStatus::Ok) return ok(m);
    const FeatureOffer as_offer{m.version, m.version, m.credits, m.features, m.rx_buffer_size,
                                m.keepalive_interval_ms, m.keepalive_timeout_ms};
    if (const auto why = validate_offer(as_offer); !why.empty()) return Result::fail(why);
    return ok(m);
}

Result decode_keepalive(const std::uint8_t* p) {
    if (!all_zero(p, kHeaderEnd, kControlMessageSize)) return Result::fail(kReservedSet);
    return ok(Keepalive{});
}

// The peer will RDMA WRITE into [addr, addr + length): the length must be an
// RX ring size we would accept, and the range must not wrap around.
Result decode_xfer(const std::uint8_t* p) {
    if (!all_zero(p, kXferEnd, kControlMessageSize)) return Result::fail(kReservedSet);
    const XferMemory m{get_u32(p + kOffRkey), get_u64(p + kOffAddr), get_u32(p + kOffLength)};
    if (m.length < kMinRxBufferSize || m.length > kMaxRxBufferSize)
        return Result::fail("control message: xfer memory length out of range");
    if (m.length % kRxBufferAlignment != 0)
        return Result::fail("control message: xfer memory length not a multiple of 4 KiB");
    if (m.addr == 0) return Result::fail("control message: xfer memory address is null");
    if (m.addr > std::numeric_limits<std::uint64_t>::max() - m.length)
        return Result::fail("control message: xfer memory range wraps around");
    return ok(m);
}

// Both counters are cumulative and wrap by design: any value is valid.
Result decode_credit_update(const std::uint8_t* p) {
    if (!all_zero(p, kCreditEnd, kControlMessageSize)) return Result::fail(kReservedSet);
    return ok(CreditUpdate{get_u32(p + kOffCreditsGranted), get_u64(p + kOffRxConsumed)});
}

Result decode_close(const std::uint8_t* p) {
    if (!all_zero(p, kHeaderEnd, kOffBytesSent) || !all_zero(p, kCloseEnd, kControlMessageSize))
        return Result::fail(kReservedSet);
    return ok(CloseMessage{get_u64(p + kOffBytesSent), get_u64(p + kOffCloseRxConsumed)});
}

}  // namespace

std::string_view to_string(NegotiationStatus s) {
    switch (s) {
        case NegotiationStatus::Ok: return "ok";
        case NegotiationStatus::NoCommonVersion: return "no common protocol version";
        case NegotiationStatus::MissingRequiredFeature: return "a required feature is missing";
        case NegotiationStatus::BadParameters: return "parameters out of range";
    }
    return "unknown negotiation status";  // a value no decoder lets through
}

ControlBytes encode_control(const ControlMessage& msg, std::uint8_t version) {
    ControlBytes out{};  // reserved bytes and flags stay zero
    const Opcode op = std::visit([&](const auto& m) { return put_body(out.data(), m); }, msg);
    put_u16(out.data() + kOffOpcode, static_cast<std::uint16_t>(op));
    put_u8(out.data() + kOffVersion, version);
    return out;
}

Decoded<ControlMessage> decode_control(std::span<const std::uint8_t> bytes) {
    if (bytes.size() < kControlMessageSize) return Result::need_more();
    const std::uint8_t* p = bytes.data();
    const std::uint8_t version = get_u8(p + kOffVersion);
    if (version < kMinProtocolVersion || version > kMaxProtocolVersion)
        return Result::fail("control message: unsupported version");
    if (get_u8(p + kOffFlags) != 0) return Result::fail("control message: flags set");
    switch (static_cast<Opcode>(get_u16(p + kOffOpcode))) {
        case Opcode::GetServerFeature: return decode_offer(p);
        case Opcode::SetClientFeature: return decode_agreement(p);
        case Opcode::Keepalive: return decode_keepalive(p);
        case Opcode::RegisterXferMemory: return decode_xfer(p);
        case Opcode::CreditUpdate: return decode_credit_update(p);
        case Opcode::Close: return decode_close(p);
    }
    return Result::fail("control message: unknown opcode");
}

}  // namespace pg_rdma::protocol
