// libFuzzer target: decode_upgrade_reply, the client reading the server's
// answer. Properties: the decoder's general promises; each reply kind consumes
// what upgrade.hpp says; an accepted 'R' re-encodes to the same 56 bytes.
#include <algorithm>
#include <cstdint>

#include "fuzz_check.hpp"
#include "protocol/upgrade.hpp"

using namespace pg_rdma::protocol;
using pg_rdma::protocol::fuzz::require;

namespace {

void check_accept(const RdmaEndpoint& endpoint, const std::uint8_t* data, std::size_t consumed) {
    require(consumed == kUpgradeAcceptSize, "an accept consumes 56 bytes");
    require(endpoint.port != 0, "an accepted endpoint has a port");
    const UpgradeAcceptBytes again = encode_upgrade_accept(endpoint);
    require(std::equal(again.begin(), again.end(), data), "an accept re-encodes identically");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto r = decode_upgrade_reply({data, size});
    pg_rdma::protocol::fuzz::check_decoded(r, size);
    if (r.status == DecodeStatus::NeedMore)
        require(size == 0 || (data[0] == kReplyAccept && size < kUpgradeAcceptSize),
                "NeedMore only for nothing or a short accept");
    if (!r.is_ok()) return 0;
    switch (r.value.kind) {
        case ReplyKind::Accept: check_accept(r.value.endpoint, data, r.consumed); break;
        case ReplyKind::Decline:
            require(data[0] == kReplyDecline && r.consumed == 1, "a decline is the one byte 'N'");
            break;
        case ReplyKind::ServerLacksRdma:
            require(data[0] == kReplyError && r.consumed == 0, "an ErrorResponse is left unread");
            break;
    }
    return 0;
}
