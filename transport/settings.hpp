// Tunables of one RDMA connection, with their defaults and units.
//
// Pinned (registered) memory per connection with the defaults:
//   RX ring 256 KiB + TX staging 128 KiB + control slots (credits + SQ depth)
//   x 32 B = 388 KiB, under the 512 KiB budget a backend may pin.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string_view>

#include "protocol/control.hpp"
#include "protocol/negotiation.hpp"

namespace pg_rdma::transport {

using Millis = std::chrono::milliseconds;

// What to do when RDMA cannot be used for a session.
enum class Mode {
    Prefer,   // use RDMA when both sides can, otherwise stay on TCP
    Require,  // fail the connection with a message that says why
};

struct Settings {
    std::uint32_t rx_buffer_size = 256 * 1024;  // bytes the peer may write into, pinned
    std::uint32_t tx_buffer_size = 128 * 1024;  // bytes of local staging for writes, pinned
    std::uint16_t credits = 64;                 // receive WRs posted for the peer
    std::uint16_t send_queue_depth = 64;        // send WRs in flight at most
    // Writes up to this many bytes travel inside their work request
    // (IBV_SEND_INLINE): the device takes the payload with the doorbell
    // instead of reading it from registered memory afterwards, which saves
    // a DMA read (a real NIC) or a memory-region lookup (rxe) on the
    // latency path of every small query and reply. A device that refuses
    // this much is asked for half as much, and so on (next_inline_ask);
    // one that takes no inline data at all still works. 0 disables.
    std::uint32_t max_inline = 512;             // bytes
    Millis keepalive_interval{2'000};           // probe the peer after this much tx silence
    Millis keepalive_timeout{20'000};           // peer is dead after this much without evidence
    // Passive side's policy for what a peer may ask for during negotiation:
    // a client, before authentication, cannot impose a shorter keepalive
    // interval (this process wakes twice per interval) or a longer wait
    // before a dead peer is noticed than these. This side's own values
    // widen them: the floor is at most keepalive_interval, the cap at least
    // keepalive_timeout (keepalive_bounds()).
    Millis keepalive_min_interval{1'000};       // floor of the negotiated interval
    Millis keepalive_max_timeout{600'000};      // cap of the negotiated timeout (10 min)
    Millis connect_timeout{10'000};             // whole setup: resolve, connect, negotiate
    Millis close_drain_timeout{2'000};          // how long close/exit waits for queued sends
    // How long wait() polls the completion queue before the caller sleeps,
    // so a reply that comes soon is taken without a wakeup (rsocket polls
    // 10 us). A wait for a reply spins from busy_poll up to busy_poll_max
    // while replies come that fast; other waits (more of a stream, room to
    // write) and idle sessions spin busy_poll; none spins while spinning
    // keeps catching nothing (see adaptive_spin.hpp). 0 disables. read()
    // itself never spins.
    std::chrono::microseconds busy_poll{50};
    std::chrono::microseconds busy_poll_max{500};
    // Whether a client follows an upgrade reply naming another address than
    // its TCP peer. The reply travels in clear before any TLS, so whoever
    // can alter it could otherwise move the whole session to a host of
    // their choosing. Turn on only where the TCP peer is not the server
    // itself (a TCP proxy or port forwarder in front of PostgreSQL) and the
    // path to it is trusted.
    bool allow_redirect = false;
};

// Limits of the settings that are not the protocol's (protocol/control.hpp).
inline constexpr std::uint32_t kMinTxBufferSize = 4096;               // bytes
inline constexpr std::uint32_t kMaxTxBufferSize = 64u * 1024 * 1024;  // bytes
inline constexpr std::uint16_t kMinSendQueueDepth = 4;   // WRs: signalling needs depth / 2 >= 2
inline constexpr std::uint16_t kMaxSendQueueDepth = 4096;  // WRs
// Larger inline writes cost each send WR that much more queue memory and
// gain nothing: above a few hundred bytes the DMA read is not the cost.
inline constexpr std::uint32_t kMaxInline = 1024;  // bytes
// Below this, an inline write saves too little to be worth asking for.
inline constexpr std::uint32_t kMinInlineAsk = 32;  // bytes

// What to ask for after a device refused a queue pair with `refused` bytes
// of inline data: half as much, down to kMinInlineAsk, then none. Devices
// take anything up to their own limit (rxe 512 B, siw and others less),
// so the first size they accept is at least half of that limit.
constexpr std::uint32_t next_inline_ask(std::uint32_t refused) {
    return refused / 2 >= kMinInlineAsk ? refused / 2 : 0;
}

inline constexpr std::chrono::microseconds kMaxBusyPoll{100'000};  // a longer spin is a bug, not a tune

// Why `s` cannot be used, or empty when it can. Checked where a connection
// or listener is created (Endpoint::create, Listener::create).
constexpr std::string_view settings_problem(const Settings& s) {
    using protocol::kMaxKeepaliveIntervalMs, protocol::kMinKeepaliveIntervalMs, protocol::kMaxKeepaliveTimeoutMs;
    if (s.rx_buffer_size < protocol::kMinRxBufferSize || s.rx_buffer_size > protocol::kMaxRxBufferSize ||
        s.rx_buffer_size % protocol::kRxBufferAlignment != 0)
        return "rx_buffer_size must be a multiple of 4 KiB between 4 KiB and 64 MiB";
    if (s.tx_buffer_size < kMinTxBufferSize || s.tx_buffer_size > kMaxTxBufferSize)
        return "tx_buffer_size must be between 4 KiB and 64 MiB";
    if (s.credits < protocol::kMinCredits || s.credits > protocol::kMaxCredits)
        return "credits must be between 4 and 4096";
    if (s.send_queue_depth < kMinSendQueueDepth || s.send_queue_depth > kMaxSendQueueDepth)
        return "send_queue_depth must be between 4 and 4096";
    if (s.max_inline > kMaxInline) return "max_inline must be at most 1024 bytes";
    const auto interval = s.keepalive_interval.count();
    const auto timeout = s.keepalive_timeout.count();
    if (interval < kMinKeepaliveIntervalMs || interval > kMaxKeepaliveIntervalMs)
        return "keepalive_interval must be between 10 ms and 1 h";
    if (timeout < 2 * interval || timeout > kMaxKeepaliveTimeoutMs)
        return "keepalive_timeout must be at least twice keepalive_interval and at most 24 h";
    if (s.keepalive_min_interval.count() < kMinKeepaliveIntervalMs ||
        s.keepalive_min_interval.count() > kMaxKeepaliveIntervalMs)
        return "keepalive_min_interval must be between 10 ms and 1 h";
    if (s.keepalive_max_timeout.count() > kMaxKeepaliveTimeoutMs)
        return "keepalive_max_timeout must be at most 24 h";
    if (s.connect_timeout.count() <= 0) return "connect_timeout must be positive";
    if (s.close_drain_timeout.count() < 0) return "close_drain_timeout must not be negative";
    if (s.busy_poll.count() < 0 || s.busy_poll_max < s.busy_poll || s.busy_poll_max > kMaxBusyPoll)
        return "busy_poll must be between 0 and busy_poll_max, and busy_poll_max at most 100 ms";
    return {};
}

static_assert(settings_problem(Settings{}).empty(), "the default settings must be valid");

// The negotiation policy of the passive side (see keepalive_min_interval).
constexpr protocol::KeepaliveBounds keepalive_bounds(const Settings& s) {
    return {static_cast<std::uint32_t>(std::min(s.keepalive_min_interval, s.keepalive_interval).count()),
            static_cast<std::uint32_t>(std::max(s.keepalive_max_timeout, s.keepalive_timeout).count())};
}

struct Error;
// Fails with EINVAL and "invalid transport settings: <problem>" (error.hpp).
bool check_settings(const Settings& s, Error& err);
static_assert(Settings{}.rx_buffer_size + Settings{}.tx_buffer_size <= 512 * 1024,
              "the defaults must stay under the 512 KiB a backend may pin per connection");

}  // namespace pg_rdma::transport
