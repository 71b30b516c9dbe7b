// libFuzzer target: decode_probe_decline, `pgrdma doctor` reading a
// server's 'D' reply. Properties: the decoder's general promises; NeedMore
// only for a prefix that could still complete; an accepted decline
// re-encodes to the same bytes.
#include <algorithm>
#include <cstdint>

#include "fuzz_check.hpp"
#include "protocol/probe.hpp"

using namespace pg_rdma::protocol;
using pg_rdma::protocol::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto r = decode_probe_decline({data, size});
    pg_rdma::protocol::fuzz::check_decoded(r, size);
    if (r.status == DecodeStatus::NeedMore)
        require(size == 0 || (data[0] == kReplyProbeDecline && size < kMaxProbeDeclineSize),
                "NeedMore only for nothing or a short decline");
    if (!r.is_ok()) return 0;
    require(!r.value.outcome.empty() && r.value.outcome.size() <= kMaxProbeOutcomeLength, "an outcome's length");
    require(r.value.reason.size() <= kMaxProbeReasonLength, "a reason's length");
    const std::vector<std::uint8_t> again = encode_probe_decline(r.value.outcome, r.value.reason);
    require(again.size() == r.consumed && std::equal(again.begin(), again.end(), data),
            "a decline re-encodes identically");
    return 0;
}
