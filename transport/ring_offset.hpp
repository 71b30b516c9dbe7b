// Positions in a byte ring, moved along with the cumulative counters of
// rx_ring.hpp and tx_window.hpp instead of divided out of them at every
// look (`count % size` is a 64-bit division on the path of every message).
#pragma once

#include <cstdint>

namespace pg_rdma::transport {

// `offset` (< size) in a ring of `size` bytes moved on by `n` <= size
// bytes, around the end. Rings are at most 64 MiB, so the sum fits.
[[nodiscard]] inline std::uint32_t ring_advance(std::uint32_t offset, std::uint32_t n, std::uint32_t size) {
    offset += n;
    return offset >= size ? offset - size : offset;
}

}  // namespace pg_rdma::transport
