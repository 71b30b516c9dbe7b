// libFuzzer target: decode_connect_private_data, the passive side reading the
// private data of a connect request. Properties: the decoder's general
// promises; NeedMore exactly when shorter than 40 bytes; an accepted buffer is
// the encoding of its nonce followed by zero padding, all of it consumed.
#include <algorithm>
#include <cstdint>

#include "fuzz_check.hpp"
#include "protocol/byte_order.hpp"
#include "protocol/upgrade.hpp"

using namespace pg_rdma::protocol;
using pg_rdma::protocol::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto r = decode_connect_private_data({data, size});
    pg_rdma::protocol::fuzz::check_decoded(r, size);
    require((r.status == DecodeStatus::NeedMore) == (size < kConnectPrivateDataSize),
            "NeedMore exactly when shorter than the private data");
    if (!r.is_ok()) return 0;
    require(r.consumed == size, "accepted private data is consumed whole");
    const ConnectPrivateDataBytes again = encode_connect_private_data(r.value);
    require(std::equal(again.begin(), again.end(), data), "accepted private data re-encodes identically");
    require(all_zero(data, kConnectPrivateDataSize, size), "accepted padding is zero");
    return 0;
}
