// libFuzzer target: classify_first_packet, which sees the first bytes of
// every session before PostgreSQL does. Properties: never Error; Upgrade
// exactly for the 8-byte upgrade request and Probe exactly for the 8-byte
// probe request (each consumed), NeedMore exactly for proper prefixes of
// either, Other for everything else and then nothing is consumed;
// is_cancel_request on the same bytes reads no further than they go and
// never claims our requests.
#include <algorithm>
#include <cstdint>

#include "fuzz_check.hpp"
#include "protocol/probe.hpp"
#include "protocol/upgrade.hpp"

using namespace pg_rdma::protocol;
using pg_rdma::protocol::fuzz::require;

namespace {

bool starts_as(const std::uint8_t* data, std::size_t size, const UpgradeRequestBytes& request) {
    return std::equal(data, data + std::min(size, request.size()), request.begin());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto r = classify_first_packet({data, size});
    pg_rdma::protocol::fuzz::check_decoded(r, size);
    const UpgradeRequestBytes upgrade = encode_upgrade_request();
    const UpgradeRequestBytes probe = encode_probe_request();
    const bool upgrade_prefix = starts_as(data, size, upgrade);
    const bool probe_prefix = starts_as(data, size, probe);
    const bool whole = size >= upgrade.size();
    switch (r.status) {
        case DecodeStatus::Error: require(false, "a first packet is never an error"); break;
        case DecodeStatus::NeedMore:
            require((upgrade_prefix || probe_prefix) && !whole, "NeedMore only for a prefix of a request");
            break;
        case DecodeStatus::Ok:
            if (r.value == FirstPacket::Upgrade)
                require(upgrade_prefix && whole && r.consumed == upgrade.size(),
                        "Upgrade only for the whole upgrade request, which is consumed");
            else if (r.value == FirstPacket::Probe)
                require(probe_prefix && whole && r.consumed == probe.size(),
                        "Probe only for the whole probe request, which is consumed");
            else
                require(!(upgrade_prefix || probe_prefix) && r.consumed == 0,
                        "Other only for non-requests, consuming nothing");
            break;
    }
    if (is_cancel_request({data, size}))
        require(size >= 8 && r.status == DecodeStatus::Ok && r.value == FirstPacket::Other,
                "a CancelRequest is never our request");
    return 0;
}
