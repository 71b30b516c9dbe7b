// Big-endian (network order) loads and stores on byte spans.
// The wire formats are defined byte by byte, so these never cast a struct
// over a buffer: alignment and padding stay out of the protocol.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pg_rdma::protocol {

inline void put_u8(std::uint8_t* p, std::uint8_t v) { p[0] = v; }
inline void put_u16(std::uint8_t* p, std::uint16_t v) {
    p[0] = static_cast<std::uint8_t>(v >> 8);
    p[1] = static_cast<std::uint8_t>(v);
}
inline void put_u32(std::uint8_t* p, std::uint32_t v) {
    put_u16(p, static_cast<std::uint16_t>(v >> 16));
    put_u16(p + 2, static_cast<std::uint16_t>(v));
}
inline void put_u64(std::uint8_t* p, std::uint64_t v) {
    put_u32(p, static_cast<std::uint32_t>(v >> 32));
    put_u32(p + 4, static_cast<std::uint32_t>(v));
}

inline std::uint8_t get_u8(const std::uint8_t* p) { return p[0]; }
inline std::uint16_t get_u16(const std::uint8_t* p) {
    return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}
inline std::uint32_t get_u32(const std::uint8_t* p) {
    return (std::uint32_t{get_u16(p)} << 16) | get_u16(p + 2);
}
inline std::uint64_t get_u64(const std::uint8_t* p) {
    return (std::uint64_t{get_u32(p)} << 32) | get_u32(p + 4);
}

// True when bytes [from, to) of p are all zero: reserved fields must be.
inline bool all_zero(const std::uint8_t* p, std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to; ++i)
        if (p[i] != 0) return false;
    return true;
}

}  // namespace pg_rdma::protocol
