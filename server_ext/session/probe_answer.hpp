// Answering `pgrdma doctor`'s probe (protocol/probe.hpp) in the backend the
// postmaster started for it: the same checks and the same RDMA setup as a
// session's upgrade, then an echo over the queue pair, or a 'D' decline
// that says which outcome and why. Either way the TCP connection is then
// shut down (the client sees the end), and the caller puts the session in
// SessionPhase::Probed, where the socket reads as ended to PostgreSQL:
// bytes the client sent after its request (which a shutdown leaves
// readable) never reach it, so PostgreSQL ends the backend before any
// startup packet, without a word in its log.
#pragma once

#include <cstddef>
#include <cstdint>

#include "server_ext/session_outcomes.hpp"
#include "server_ext/setup_gate.hpp"
#include "server_ext/stat_slots.hpp"

namespace pg_rdma::server {

struct ProbeAnswer {
    static constexpr std::size_t kReasonSize = 512;  // bytes
    bool rdma = false;                       // the probe's echo ran over RDMA
    Outcome outcome = Outcome::SetupError;   // what a session would have come out as
    char reason[kReasonSize] = {};           // !rdma: what the decline said
    char device[kStatFieldSize] = {};        // rdma: the device it ran on
    std::uint64_t echoed = 0;                // bytes echoed
    GateRefusal refusal;                     // over a cap: whether this decline logs the caps' line
};

// `offered`: whether the address the client reached is a pg_rdma address.
// Never raises a PostgreSQL error.
void answer_probe(int fd, bool offered, ProbeAnswer& answer) noexcept;

}  // namespace pg_rdma::server
