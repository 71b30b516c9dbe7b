// Control messages: the decoder refuses anything a peer could get wrong or
// forge — short input, unknown opcodes and versions, set reserved bytes and
// flags, and every value out of range — and says why without throwing.
#include "testing/catch.hpp"

#include <limits>
#include <string_view>

#include "protocol/byte_order.hpp"
#include "protocol/control.hpp"
#include "samples.hpp"

using namespace pg_rdma::protocol;
using namespace pg_rdma::protocol::test;

namespace {

constexpr std::size_t kOffVersion = 2;
constexpr std::size_t kOffFlags = 3;

// Byte offsets of the fields poked below (from control.hpp).
constexpr std::size_t kOffMinVersion = 4;
constexpr std::size_t kOffMaxVersion = 5;
constexpr std::size_t kOffCredits = 6;
constexpr std::size_t kOffRxBuffer = 16;
constexpr std::size_t kOffInterval = 20;
constexpr std::size_t kOffTimeout = 24;
constexpr std::size_t kOffAddr = 8;
constexpr std::size_t kOffLength = 16;

void check_rejected(const ControlBytes& bytes, std::string_view why) {
    const auto r = decode_control(bytes);
    CHECK(r.status == DecodeStatus::Error);
    CHECK(r.consumed == 0);
    CHECK(r.error == why);
}

// Bytes of each message kind that control.hpp names reserved.
std::vector<std::size_t> reserved_bytes(std::size_t opcode) {
    std::vector<std::size_t> idx;
    auto add = [&](std::size_t from, std::size_t to) {
        for (std::size_t i = from; i < to; ++i) idx.push_back(i);
    };
    switch (opcode) {
        case 0: case 1: add(28, 32); break;  // feature offer / agreement
        case 2: add(4, 32); break;           // keepalive
        case 3: add(20, 32); break;          // xfer memory
        case 4: add(16, 32); break;          // credit update
        case 5: add(4, 8); add(24, 32); break;  // close
        default: break;
    }
    return idx;
}

ControlBytes offer_with_u32(std::size_t offset, std::uint32_t value) {
    ControlBytes b = encode_control(sample_offer());
    put_u32(b.data() + offset, value);
    return b;
}

ControlBytes xfer_bytes(std::uint64_t addr, std::uint32_t length) {
    return encode_control(XferMemory{1, addr, length});
}

}  // namespace

TEST_CASE("a message cut short at any length asks for more bytes") {
    for (const ControlMessage& msg : sample_messages()) {
        const ControlBytes full = encode_control(msg);
        for (std::size_t n = 0; n < kControlMessageSize; ++n) {
            INFO("kind " << msg.index() << " cut to " << n << " bytes");
            const auto r = decode_control(std::span(full).first(n));
            CHECK(r.status == DecodeStatus::NeedMore);
            CHECK(r.consumed == 0);
        }
    }
}

TEST_CASE("an unknown opcode is an error") {
    for (const int op : {6, 7, 0x0100, 0x8000, 0xffff}) {
        INFO("opcode " << op);
        ControlBytes b = encode_control(Keepalive{});
        put_u16(b.data(), static_cast<std::uint16_t>(op));
        check_rejected(b, "control message: unknown opcode");
    }
}

TEST_CASE("a version outside the supported range is an error for every kind") {
    for (const ControlMessage& msg : sample_messages()) {
        for (const std::uint8_t v : {std::uint8_t{0}, std::uint8_t{kMaxProtocolVersion + 1}, std::uint8_t{255}}) {
            INFO("kind " << msg.index() << " version " << int{v});
            check_rejected(encode_control(msg, v), "control message: unsupported version");
        }
    }
}

TEST_CASE("any flag bit set is an error for every kind") {
    for (const ControlMessage& msg : sample_messages()) {
        for (int bit = 0; bit < 8; ++bit) {
            INFO("kind " << msg.index() << " flag bit " << bit);
            ControlBytes b = encode_control(msg);
            b[kOffFlags] = static_cast<std::uint8_t>(1u << bit);
            check_rejected(b, "control message: flags set");
        }
    }
}

TEST_CASE("every reserved byte set is an error for every kind") {
    for (const ControlMessage& msg : sample_messages()) {
        const auto reserved = reserved_bytes(msg.index());
        REQUIRE_FALSE(reserved.empty());
        for (const std::size_t i : reserved) {
            for (const std::uint8_t value : {std::uint8_t{0x01}, std::uint8_t{0x80}, std::uint8_t{0xff}}) {
                INFO("kind " << msg.index() << " reserved byte " << i << " = " << int{value});
                ControlBytes b = encode_control(msg);
                b[i] = value;
                check_rejected(b, "control message: reserved bytes not zero");
            }
        }
    }
}

TEST_CASE("an offer with a bad version range is an error") {
    ControlBytes b = encode_control(sample_offer());
    b[kOffMinVersion] = 0;
    check_rejected(b, "feature parameters: bad version range");
    b[kOffMinVersion] = 3;
    b[kOffMaxVersion] = 2;
    check_rejected(b, "feature parameters: bad version range");
}

TEST_CASE("an offer with credits out of range is an error") {
    for (const std::uint16_t credits : {std::uint16_t{0}, std::uint16_t{kMinCredits - 1},
                                        std::uint16_t{kMaxCredits + 1}, std::uint16_t{0xffff}}) {
        INFO("credits " << credits);
        ControlBytes b = encode_control(sample_offer());
        put_u16(b.data() + kOffCredits, credits);
        check_rejected(b, "feature parameters: credits out of range");
    }
}

TEST_CASE("an offer with an RX buffer size out of range or unaligned is an error") {
    for (const std::uint32_t size : {0u, kMinRxBufferSize - kRxBufferAlignment, kMaxRxBufferSize + kRxBufferAlignment,
                                     0xfffff000u}) {
        INFO("rx_buffer_size " << size);
        check_rejected(offer_with_u32(kOffRxBuffer, size), "feature parameters: rx_buffer_size out of range");
    }
    for (const std::uint32_t size : {kMinRxBufferSize + 1, kSampleRxBuffer - 1, kMaxRxBufferSize - 512}) {
        INFO("rx_buffer_size " << size);
        check_rejected(offer_with_u32(kOffRxBuffer, size),
                       "feature parameters: rx_buffer_size not a multiple of 4 KiB");
    }
}

TEST_CASE("an offer with keepalive values out of range is an error") {
    for (const std::uint32_t interval : {0u, kMinKeepaliveIntervalMs - 1, kMaxKeepaliveIntervalMs + 1, ~0u}) {
        INFO("interval " << interval);
        check_rejected(offer_with_u32(kOffInterval, interval),
                       "feature parameters: keepalive interval out of range");
    }
    check_rejected(offer_with_u32(kOffTimeout, kMaxKeepaliveTimeoutMs + 1),
                   "feature parameters: keepalive timeout out of range");
    check_rejected(offer_with_u32(kOffTimeout, ~0u), "feature parameters: keepalive timeout out of range");
    // sample interval is 1000 ms: 1999 ms is less than twice that
    check_rejected(offer_with_u32(kOffTimeout, 1999),
                   "feature parameters: keepalive timeout shorter than twice the interval");
    check_rejected(offer_with_u32(kOffTimeout, 0),
                   "feature parameters: keepalive timeout shorter than twice the interval");
}

TEST_CASE("an accepting agreement is range-checked like an offer") {
    ControlBytes b = encode_control(sample_agreement());
    put_u16(b.data() + kOffCredits, 0);
    check_rejected(b, "feature parameters: credits out of range");
    b = encode_control(sample_agreement());
    put_u32(b.data() + kOffRxBuffer, kMaxRxBufferSize + kRxBufferAlignment);
    check_rejected(b, "feature parameters: rx_buffer_size out of range");
    b = encode_control(sample_agreement());
    put_u32(b.data() + kOffTimeout, 1);
    check_rejected(b, "feature parameters: keepalive timeout shorter than twice the interval");
    b = encode_control(sample_agreement());
    b[kOffMinVersion] = 0;  // the chosen version
    check_rejected(b, "feature parameters: bad version range");
}

TEST_CASE("an unknown negotiation status is an error") {
    for (const std::uint8_t status : {std::uint8_t{4}, std::uint8_t{0x80}, std::uint8_t{0xff}}) {
        INFO("status " << int{status});
        ControlBytes b = encode_control(sample_agreement());
        b[kOffMaxVersion] = status;  // the status byte in SetClientFeature
        check_rejected(b, "control message: unknown negotiation status");
    }
}

TEST_CASE("xfer memory with a bad length is an error") {
    for (const std::uint32_t length : {0u, kMinRxBufferSize - 1, kMaxRxBufferSize + kRxBufferAlignment, ~0u}) {
        INFO("length " << length);
        check_rejected(xfer_bytes(0x10000, length), "control message: xfer memory length out of range");
    }
    check_rejected(xfer_bytes(0x10000, kSampleRxBuffer + 1),
                   "control message: xfer memory length not a multiple of 4 KiB");
}

TEST_CASE("xfer memory at address 0 is an error") {
    check_rejected(xfer_bytes(0, kSampleRxBuffer), "control message: xfer memory address is null");
}

TEST_CASE("xfer memory that wraps past the end of the address space is an error") {
    constexpr std::uint64_t kTop = std::numeric_limits<std::uint64_t>::max();
    check_rejected(xfer_bytes(kTop, kMinRxBufferSize), "control message: xfer memory range wraps around");
    check_rejected(xfer_bytes(kTop - kMinRxBufferSize + 1, kMinRxBufferSize),
                   "control message: xfer memory range wraps around");
    // One byte lower ends exactly at the top: still addressable.
    const auto r = decode_control(xfer_bytes(kTop - kMinRxBufferSize, kMinRxBufferSize));
    CHECK(r.status == DecodeStatus::Ok);
    ControlBytes b = xfer_bytes(1, kMinRxBufferSize);
    put_u64(b.data() + kOffAddr, kTop);
    put_u32(b.data() + kOffLength, kMaxRxBufferSize);
    check_rejected(b, "control message: xfer memory range wraps around");
}

TEST_CASE("a rejection reason never echoes the peer's bytes") {
    // Fill the whole message with a recognisable pattern that is also an
    // unknown opcode: the reason must be the fixed text.
    ControlBytes b{};
    b.fill('A');
    b[kOffVersion] = kMinProtocolVersion;
    b[kOffFlags] = 0;
    const auto r = decode_control(b);
    REQUIRE(r.status == DecodeStatus::Error);
    CHECK(r.error.find("AA") == std::string_view::npos);
    CHECK(r.error == "control message: unknown opcode");
}
