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

}  // namespace

Opener classify_opener(std::span<const std::uint8_t> bytes) noexcept {
    if (bytes.size() < kHeaderBytes) return Opener::None;
    if (bytes[0] == kTlsHandshakeRecord)
        return bytes[1] == kTlsMajorVersion && offers_postgresql_alpn(bytes) ? Opener::DirectSsl : Opener::None;
    const std::uint32_t length = get_u32(bytes.data());
    const std::uint32_t code = get_u32(bytes.data() + 4);
    if (length == kHeaderBytes && code == kSslRequestCode) return Opener::SslRequest;
    if (length == kHeaderBytes && code == kGssEncRequestCode) return Opener::GssEncRequest;
    if ((code >> 16) == kProtocolMajor3 && length >= kMinStartupPacketLength && length <= kMaxStartupPacketLength)
        return Opener::Startup;
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
