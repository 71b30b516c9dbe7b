// Valid example messages shared by the protocol tests: each test starts from
// one of these and changes exactly the field it is about.
#pragma once

#include <cstdint>
#include <vector>

#include "protocol/control.hpp"
#include "protocol/negotiation.hpp"

namespace pg_rdma::protocol::test {

inline constexpr std::uint32_t kSampleRxBuffer = 256 * 1024;  // bytes

inline FeatureOffer sample_offer() {
    return {kMinProtocolVersion, kMaxProtocolVersion, 64, kSupportedFeatures, kSampleRxBuffer, 1000, 5000};
}

inline FeatureAgreement sample_agreement() {
    return {kMinProtocolVersion, NegotiationStatus::Ok, 128, kSupportedFeatures, 512 * 1024, 500, 5000};
}

// Keepalive bounds that restrict nothing beyond the protocol's own ranges:
// negotiate() then merges the two offers as if there were no bounds.
inline KeepaliveBounds open_bounds() { return {kMinKeepaliveIntervalMs, kMaxKeepaliveTimeoutMs}; }

inline XferMemory sample_xfer() { return {0x12345678u, 0x00007f0012340000ull, kSampleRxBuffer}; }

inline CreditUpdate sample_credit_update() { return {0xfffffff0u, 0x0123456789abcdefull}; }

inline CloseMessage sample_close() { return {0x1122334455667788ull, 0x0102030405060708ull}; }

// One valid message of every kind, in opcode order.
inline std::vector<ControlMessage> sample_messages() {
    return {sample_offer(), sample_agreement(), Keepalive{},
            sample_xfer(),  sample_credit_update(), sample_close()};
}

}  // namespace pg_rdma::protocol::test
