// Control messages: every kind encodes to the documented bytes and decodes
// back to the same value.
#include "testing/catch.hpp"

#include "protocol/byte_order.hpp"
#include "protocol/control.hpp"
#include "samples.hpp"

using namespace pg_rdma::protocol;
using pg_rdma::protocol::test::sample_messages;

namespace {

ControlMessage round_trip(const ControlMessage& msg) {
    const ControlBytes bytes = encode_control(msg);
    const auto decoded = decode_control(bytes);
    REQUIRE(decoded.status == DecodeStatus::Ok);
    CHECK(decoded.consumed == kControlMessageSize);
    CHECK(decoded.error.empty());
    return decoded.value;
}

}  // namespace

TEST_CASE("every control message kind survives encode then decode") {
    for (const ControlMessage& msg : sample_messages()) {
        INFO("variant index " << msg.index());
        CHECK(round_trip(msg) == msg);
    }
}

TEST_CASE("the opcode on the wire follows the message kind") {
    const std::vector<ControlMessage> messages = sample_messages();
    for (std::size_t i = 0; i < messages.size(); ++i) {
        const ControlBytes bytes = encode_control(messages[i]);
        CHECK(get_u16(bytes.data()) == i);  // the variant is in opcode order
        CHECK(bytes[2] == kMinProtocolVersion);
        CHECK(bytes[3] == 0);
    }
}

TEST_CASE("extreme field values survive a round trip") {
    CHECK(round_trip(FeatureOffer{1, 255, kMaxCredits, ~0ull, kMaxRxBufferSize, kMaxKeepaliveIntervalMs,
                                  kMaxKeepaliveTimeoutMs}) ==
          ControlMessage{FeatureOffer{1, 255, kMaxCredits, ~0ull, kMaxRxBufferSize,
                                      kMaxKeepaliveIntervalMs, kMaxKeepaliveTimeoutMs}});
    const FeatureOffer smallest{1, 1, kMinCredits, 0, kMinRxBufferSize, kMinKeepaliveIntervalMs,
                                2 * kMinKeepaliveIntervalMs};
    CHECK(round_trip(smallest) == ControlMessage{smallest});
    const XferMemory top{~0u, ~0ull - kMaxRxBufferSize, kMaxRxBufferSize};  // ends at 2^64 - 1
    CHECK(round_trip(top) == ControlMessage{top});
    const CreditUpdate wrapped{~0u, ~0ull};
    CHECK(round_trip(wrapped) == ControlMessage{wrapped});
    const CloseMessage nothing_sent{0};
    CHECK(round_trip(nothing_sent) == ControlMessage{nothing_sent});
}

TEST_CASE("a refusal carries the server's values unchecked") {
    const FeatureAgreement refusal{1, NegotiationStatus::NoCommonVersion, 0, 0, 0, 0, 0};
    CHECK(round_trip(refusal) == ControlMessage{refusal});
    const FeatureAgreement bad{7, NegotiationStatus::BadParameters, 1, ~0ull, 3, 1, 0};
    CHECK(round_trip(bad) == ControlMessage{bad});
}

TEST_CASE("decode consumes only the first message of a longer buffer") {
    std::vector<std::uint8_t> two;
    for (const ControlMessage& msg : {ControlMessage{Keepalive{}}, ControlMessage{CloseMessage{9}}}) {
        const ControlBytes b = encode_control(msg);
        two.insert(two.end(), b.begin(), b.end());
    }
    const auto first = decode_control(two);
    REQUIRE(first.status == DecodeStatus::Ok);
    CHECK(first.consumed == kControlMessageSize);
    CHECK(std::holds_alternative<Keepalive>(first.value));
    const auto second = decode_control(std::span(two).subspan(first.consumed));
    REQUIRE(second.status == DecodeStatus::Ok);
    CHECK(std::get<CloseMessage>(second.value).bytes_sent == 9);
}

// The layouts below are written out by hand from control.hpp, so a mistake
// made the same way in the encoder and the decoder still shows up here.
TEST_CASE("GetServerFeature has the documented byte layout") {
    const ControlBytes expected{0x00, 0x00, 0x01, 0x00,                           // opcode, version, flags
                                0x01, 0x01, 0x00, 0x40,                           // min, max, credits 64
                                0, 0, 0, 0, 0, 0, 0, 0x3F,                        // features
                                0x00, 0x04, 0x00, 0x00,                           // rx 256 KiB
                                0x00, 0x00, 0x03, 0xE8,                           // interval 1000 ms
                                0x00, 0x00, 0x13, 0x88,                           // timeout 5000 ms
                                0, 0, 0, 0};
    CHECK(encode_control(pg_rdma::protocol::test::sample_offer()) == expected);
}

TEST_CASE("SetClientFeature has the documented byte layout") {
    const FeatureAgreement a{1, NegotiationStatus::MissingRequiredFeature, 0x0102, 0x0a0b0c0d0e0f1011ull,
                             0x00100000, 0x11223344, 0x55667788};
    const ControlBytes expected{0x00, 0x01, 0x01, 0x00, 0x01, 0x02, 0x01, 0x02,
                                0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11,
                                0x00, 0x10, 0x00, 0x00, 0x11, 0x22, 0x33, 0x44,
                                0x55, 0x66, 0x77, 0x88, 0, 0, 0, 0};
    CHECK(encode_control(a) == expected);
}

TEST_CASE("Keepalive is a bare header") {
    ControlBytes expected{};
    expected[1] = 0x02;
    expected[2] = 0x01;
    CHECK(encode_control(Keepalive{}) == expected);
}

TEST_CASE("RegisterXferMemory has the documented byte layout") {
    const ControlBytes expected{0x00, 0x03, 0x01, 0x00, 0x12, 0x34, 0x56, 0x78,
                                0x00, 0x00, 0x7f, 0x00, 0x12, 0x34, 0x00, 0x00,
                                0x00, 0x04, 0x00, 0x00, 0, 0, 0, 0,
                                0, 0, 0, 0, 0, 0, 0, 0};
    CHECK(encode_control(pg_rdma::protocol::test::sample_xfer()) == expected);
}

TEST_CASE("CreditUpdate has the documented byte layout") {
    const ControlBytes expected{0x00, 0x04, 0x01, 0x00, 0xff, 0xff, 0xff, 0xf0,
                                0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
                                0, 0, 0, 0, 0, 0, 0, 0,
                                0, 0, 0, 0, 0, 0, 0, 0};
    CHECK(encode_control(pg_rdma::protocol::test::sample_credit_update()) == expected);
}

TEST_CASE("Close has the documented byte layout") {
    const ControlBytes expected{0x00, 0x05, 0x01, 0x00, 0, 0, 0, 0,
                                0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
                                0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
                                0, 0, 0, 0, 0, 0, 0, 0};
    CHECK(encode_control(pg_rdma::protocol::test::sample_close()) == expected);
}

TEST_CASE("every negotiation status has its own description") {
    const NegotiationStatus all[] = {NegotiationStatus::Ok, NegotiationStatus::NoCommonVersion,
                                     NegotiationStatus::MissingRequiredFeature,
                                     NegotiationStatus::BadParameters};
    for (const NegotiationStatus a : all) {
        CHECK_FALSE(to_string(a).empty());
        for (const NegotiationStatus b : all)
            if (a != b) CHECK(to_string(a) != to_string(b));
    }
    CHECK(to_string(static_cast<NegotiationStatus>(200)) == "unknown negotiation status");
}
