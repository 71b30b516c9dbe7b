// Tunables of one RDMA connection, with their defaults and units.
//
// Pinned (registered) memory per connection with the defaults:
//   RX ring 256 KiB + TX staging 128 KiB + control slots (credits + SQ depth)
//   x 32 B = 388 KiB, under the 512 KiB budget a backend may pin.
#pragma once

#include <chrono>
#include <cstdint>

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
    Millis keepalive_interval{2'000};           // send Keepalive after this much tx silence
    Millis keepalive_timeout{20'000};           // peer is dead after this much rx silence
    Millis connect_timeout{10'000};             // whole setup: resolve, connect, negotiate
    Millis close_drain_timeout{2'000};          // how long close/exit waits for queued sends
    // How long read() polls the completion queue before it gives up with
    // EAGAIN and the caller sleeps, so a reply that comes soon is taken
    // without a wakeup (rsocket polls 10 us). The spin starts at busy_poll
    // and adapts up to busy_poll_max while waits stay that short (see
    // adaptive_spin.hpp); idle sessions spin only busy_poll. 0 disables.
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

}  // namespace pg_rdma::transport
