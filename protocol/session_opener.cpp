#include "protocol/session_opener.hpp"

#include <algorithm>
#include <array>

#include "protocol/byte_order.hpp"
#include "protocol/upgrade.hpp"

namespace pg_rdma::protocol {
namespace {

constexpr std::size_t kHeaderBytes = 8;
constexpr std::uint8_t kTlsMajorVersion = 3;  // every TLS record says 3.x
// ALPN's protocol list entry for PostgreSQL: length byte, then the name.
constexpr std::array<std::uint8_t, 11> kAlpnEntry = {10, 'p', 'o', 's', 't', 'g', 'r', 'e', 's', 'q', 'l'};

bool offers_postgresql_alpn(std::span<const std::uint8_t> hello) noexcept {
    return std::search(hello.begin(), hello.end(), kAlpnEntry.begin(), kAlpnEntry.end()) != hello.end();
}

// The pairs of a whole StartupMessage: NUL-terminated names and values,
// then a NUL; "user" must be among the names.
bool startup_pairs_hold(std::span<const std::uint8_t> packet) noexcept {
    if (packet.back() != 0) return false;
    bool user = false;
    std::size_t i = kHeaderBytes;
    const std::size_t end = packet.size() - 1;  // the final NUL
    while (i < end) {
        const auto name_end = std::find(packet.begin() + static_cast<std::ptrdiff_t>(i), packet.end(), 0);
        const std::size_t name_len = static_cast<std::size_t>(name_end - packet.begin()) - i;
        if (name_len == 0 || name_end == packet.end()) return false;
        if (name_len == 4 && std::equal(packet.begin() + static_cast<std::ptrdiff_t>(i), name_end, "user")) user = true;
        const std::size_t value = i + name_len + 1;
        if (value >= end) return false;
        const auto value_end = std::find(packet.begin() + static_cast<std::ptrdiff_t>(value), packet.end(), 0);
        if (value_end == packet.end()) return false;
        i = static_cast<std::size_t>(value_end - packet.begin()) + 1;
    }
    return i == end && user;
}

}  // namespace

std::size_t opener_length(std::span<const std::uint8_t> start) noexcept {
    if (!start.empty() && start[0] == kTlsHandshakeRecord) {
        if (start.size() < kTlsRecordHeaderLength) return 0;
        return kTlsRecordHeaderLength + std::min<std::size_t>(get_u16(start.data() + 3), kMaxTlsRecordPayload);
    }
    if (start.size() < kHeaderBytes) return 0;
    const std::uint32_t length = get_u32(start.data());
    if (length < kMinStartupPacketLength || length > kMaxStartupPacketLength) return kHeaderBytes;
    return length;
}

Opener classify_opener(std::span<const std::uint8_t> bytes) noexcept {
    if (bytes.size() < kHeaderBytes) return Opener::None;
    if (bytes[0] == kTlsHandshakeRecord)
        return bytes[1] == kTlsMajorVersion && offers_postgresql_alpn(bytes) ? Opener::DirectSsl : Opener::None;
    const std::uint32_t length = get_u32(bytes.data());
    const std::uint32_t code = get_u32(bytes.data() + 4);
    if (length == kHeaderBytes && code == kSslRequestCode) return Opener::SslRequest;
    if (length == kHeaderBytes && code == kGssEncRequestCode) return Opener::GssEncRequest;
    if ((code >> 16) == kProtocolMajor3 && (code & 0xffffu) <= kMaxMinorVersion &&
        length >= kMinStartupPacketLength && length <= kMaxStartupPacketLength) {
        if (bytes.size() < length) return Opener::Startup;
        return startup_pairs_hold(bytes.first(length)) ? Opener::Startup : Opener::None;
    }
    return Opener::None;
}

const char* to_string(Opener opener) noexcept {
    switch (opener) {
        case Opener::None: return "none";
        case Opener::Startup: return "StartupMessage";
        case Opener::SslRequest: return "SSLRequest";
        case Opener::GssEncRequest: return "GSSENCRequest";
        case Opener::DirectSsl: return "direct-SSL ClientHello";
    }
    return "?";
}

}  // namespace pg_rdma::protocol
