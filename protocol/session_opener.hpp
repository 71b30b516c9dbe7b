// A client's first packet on a TCP connection, judged from the client's
// side: does it open a PostgreSQL session? (libclient's first-write path
// upgrades only those.) PostgreSQL's own formats (protocol.sgml, "Message
// Formats"; libpq/pqcomm.h):
//   StartupMessage  int32 length (8..10000), int32 version 3.x (x < 16),
//                   then name/value pairs ending in a NUL, "user" among
//                   them: checked whenever the whole packet is at hand, so
//                   that another protocol whose header happens to read 3.x
//                   (a Kafka Metadata request) is not taken for it
//   SSLRequest      int32 8, int32 1234.5679
//   GSSENCRequest   int32 8, int32 1234.5680
//   direct SSL (17+) a TLS ClientHello whose ALPN list offers "postgresql"
// A CancelRequest is not a session: it stays on TCP (the server finds the
// session it cancels by its key, whatever carries that session).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace pg_rdma::protocol {

inline constexpr std::uint32_t kSslRequestCode = (1234u << 16) | 5679u;
inline constexpr std::uint32_t kGssEncRequestCode = (1234u << 16) | 5680u;
inline constexpr std::uint32_t kProtocolMajor3 = 3;
inline constexpr std::uint32_t kMaxStartupPacketLength = 10000;  // bytes, the server's limit
inline constexpr std::uint32_t kMinStartupPacketLength = 8;      // bytes: length and version
inline constexpr std::uint32_t kMaxMinorVersion = 15;             // 3.0-3.2 exist; room for a few more

enum class Opener { None, Startup, SslRequest, GssEncRequest, DirectSsl };

// `bytes`: the start of what the client writes first (a whole first write;
// fewer than 8 bytes is None). A StartupMessage longer than `bytes` is
// judged by its header alone.
Opener classify_opener(std::span<const std::uint8_t> bytes) noexcept;

// How many bytes the client's first message takes, for a relay that must
// hand it on whole (a first write holding only part of it may not be
// judged): a StartupMessage, SSLRequest or GSSENCRequest its length; a TLS
// record (direct SSL) its header and payload; anything else its first 8
// bytes. 0 while `start` is too short to tell. Never more than
// kMaxOpenerLength.
inline constexpr std::size_t kTlsRecordHeaderLength = 5;        // type, version, length
inline constexpr std::size_t kMaxTlsRecordPayload = 16384 + 2048;  // RFC 8446's ceiling on a record's payload
inline constexpr std::size_t kMaxOpenerLength = kTlsRecordHeaderLength + kMaxTlsRecordPayload;
static_assert(kMaxOpenerLength >= kMaxStartupPacketLength);
std::size_t opener_length(std::span<const std::uint8_t> start) noexcept;

const char* to_string(Opener opener) noexcept;

}  // namespace pg_rdma::protocol
