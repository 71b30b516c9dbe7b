// libFuzzer target: classify_first_packet, which sees the first bytes of
// every session before PostgreSQL does. Properties: never Error; Upgrade
// exactly for the 8-byte request (consuming it), NeedMore exactly for its
// proper prefixes, Other for everything else and then nothing is consumed;
// is_cancel_request on the same bytes reads no further than they go and
// never claims our request.
#include <algorithm>
#include <cstdint>

#include "fuzz_check.hpp"
#include "protocol/upgrade.hpp"

using namespace pg_rdma::protocol;
using pg_rdma::protocol::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto r = classify_first_packet({data, size});
    pg_rdma::protocol::fuzz::check_decoded(r, size);
    const UpgradeRequestBytes request = encode_upgrade_request();
    const std::size_t seen = std::min(size, request.size());
    const bool prefix = std::equal(data, data + seen, request.begin());
    switch (r.status) {
        case DecodeStatus::Error: require(false, "a first packet is never an error"); break;
        case DecodeStatus::NeedMore: require(prefix && size < request.size(), "NeedMore only for a prefix"); break;
        case DecodeStatus::Ok:
            if (r.value == FirstPacket::Upgrade)
                require(prefix && size >= request.size() && r.consumed == request.size(),
                        "Upgrade only for the whole request, which is consumed");
            else
                require(!prefix && r.consumed == 0, "Other only for non-requests, consuming nothing");
            break;
    }
    if (is_cancel_request({data, size}))
        require(size >= 8 && r.status == DecodeStatus::Ok && r.value == FirstPacket::Other,
                "a CancelRequest is never our request");
    return 0;
}
