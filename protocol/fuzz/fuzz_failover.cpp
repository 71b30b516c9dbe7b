// libFuzzer target: decode_failover, an end reading its peer's failover
// message from TCP after the queue pair failed (transport/stream_failover.cpp).
// Properties: the decoder's general promises; NeedMore only for a valid
// prefix shorter than the message; a decoded message consumes exactly 32
// bytes, re-encodes to them, and never holds bytes beyond what it sent.
#include <algorithm>
#include <cstdint>

#include "fuzz_check.hpp"
#include "protocol/failover.hpp"

using namespace pg_rdma::protocol;
using pg_rdma::protocol::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto r = decode_failover({data, size});
    pg_rdma::protocol::fuzz::check_decoded(r, size);
    if (r.status == DecodeStatus::NeedMore) require(size < kFailoverMessageSize, "NeedMore only before 24 bytes");
    if (!r.is_ok()) return 0;
    require(r.consumed == kFailoverMessageSize, "a failover message consumes its fixed size");
    require(r.value.kept_from <= r.value.sent, "a message never holds bytes beyond what it sent");
    const FailoverBytes again = encode_failover(r.value);
    require(std::equal(again.begin(), again.end(), data), "a failover message re-encodes identically");
    return 0;
}
