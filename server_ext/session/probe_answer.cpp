#include "server_ext/session/probe_answer.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "protocol/probe.hpp"
#include "server_ext/session/hba_precheck.hpp"
#include "server_ext/session/real_calls.hpp"
#include "server_ext/settings_gucs.hpp"
#include "server_ext/setup_gate.hpp"
#include "transport/setup_step.hpp"
#include "transport/tcp_upgrade.hpp"

#include "server_ext/pg_headers.hpp"
#include "server_ext/pg_compat.hpp"

namespace pg_rdma::server {
namespace {

constexpr std::size_t kEchoChunk = 16 * 1024;  // bytes per read

void set_reason(ProbeAnswer& answer, const char* why) {
    snprintf(answer.reason, sizeof answer.reason, "%s", why);
}

// `told`: what the client reads, when it should not read all the log says.
void decline(int fd, ProbeAnswer& answer, Outcome outcome, const char* why, const char* told = nullptr) {
    answer.outcome = outcome;
    set_reason(answer, why);
    const std::vector<std::uint8_t> reply =
        protocol::encode_probe_decline(outcome_name(outcome), told != nullptr ? told : answer.reason);
    // Small enough for any socket buffer: one non-blocking send or nothing.
    (void)real_calls().send(fd, reply.data(), reply.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

// Echoes what the client sends over `c` until it closes its side, up to
// kProbeEchoLimit bytes within kProbeTimeLimitMs. false with `why` when
// the connection failed or the time ran out.
bool echo(transport::Connection& c, std::uint64_t& echoed, std::string& why) {
    const transport::Deadline until = transport::SetupClock::now() + std::chrono::milliseconds(protocol::kProbeTimeLimitMs);
    std::array<std::uint8_t, kEchoChunk> buf{};
    std::size_t held = 0, sent = 0;
    for (;;) {
        const int left = transport::ms_until(until);
        if (left == 0) return why = "the probe outlasted its time limit", false;
        ssize_t n;
        short wanted;
        if (sent < held) {
            n = c.write(buf.data() + sent, held - sent);
            wanted = POLLOUT;
            if (n > 0) sent += static_cast<std::size_t>(n);
        } else {
            if (echoed >= protocol::kProbeEchoLimit) return true;
            const std::size_t room = std::min<std::uint64_t>(buf.size(), protocol::kProbeEchoLimit - echoed);
            n = c.read(buf.data(), room);
            wanted = POLLIN;
            if (n == 0) return true;  // the client is done
            if (n > 0) {
                held = static_cast<std::size_t>(n);
                sent = 0;
                echoed += held;
            }
        }
        if (n > 0) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return why = std::string("the RDMA connection failed: ") + strerror(errno), false;
        if (c.wait(wanted, left) < 0 && errno != EINTR)
            return why = std::string("waiting on the RDMA connection failed: ") + strerror(errno), false;
    }
}

void answer(int fd, bool offered, ProbeAnswer& answer) {
    if (!offered) return decline(fd, answer, Outcome::NotOffered, "this address is not in pg_rdma.listen_addresses");
    if (compat::backend_started_to_refuse())
        return decline(fd, answer, Outcome::NotAccepting,
                       "the server is not accepting sessions now (starting up, shutting down, or max_connections "
                       "reached)");
    const HbaPrecheck hba = precheck_hba(MyProcPort->raddr.addr);
    if (!hba.could_admit) {
        char why[160];
        if (hba.line > 0)
            snprintf(why, sizeof why, "no line of pg_hba.conf admits this address (rejected by line %d)", hba.line);
        else
            snprintf(why, sizeof why, "no line of pg_hba.conf matches this address");
        // Which line rejects it stays in the server's log, as PostgreSQL's
        // own refusal names no line.
        return decline(fd, answer, Outcome::HbaRejects, why, "no line of pg_hba.conf admits this address");
    }
    if (!enter_setup_gate(session_pinned_bytes(), answer.refusal))
        return decline(fd, answer, Outcome::OverCap, answer.refusal.why);
    const RealCalls& real = real_calls();
    transport::UpgradeResult result =
        transport::upgrade_server(fd, settings_from_gucs(), transport::TcpIo{real.send, real.recv},
                                  transport::ServerUpgrade::Decline::ByCaller);
    if (result.outcome != transport::UpgradeOutcome::Rdma) {
        leave_setup_gate();
        answer.outcome = classify_fallback(result.error.code);
        if (result.decline_unsent)
            return decline(fd, answer, answer.outcome, result.error.message.c_str());
        // 'R' went out and the client did not come (a firewall, its own
        // limits): it knows that much itself.
        return set_reason(answer, result.error.message.c_str());
    }
    snprintf(answer.device, sizeof answer.device, "%s", result.connection->device_name().c_str());
    std::string why;
    answer.rdma = echo(*result.connection, answer.echoed, why);
    // A queue pair that failed under the echo moves the stream onto TCP
    // and the echo completes there: that is no RDMA that works.
    if (answer.rdma && result.connection->stats().failed_over) {
        answer.rdma = false;
        why = "RDMA failed during the echo (" + result.connection->failover_reason() + ")";
    }
    answer.outcome = answer.rdma                                 ? Outcome::Upgraded
                     : result.connection->stats().failed_over ? Outcome::FailedOver
                                                              : Outcome::SetupError;
    set_reason(answer, why.c_str());
    // Closed before the gate's place is given back: the pinned memory goes
    // with the connection (its destructor drains and disconnects).
    result.connection.reset();
    leave_setup_gate();
}

}  // namespace

void answer_probe(int fd, bool offered, ProbeAnswer& out) noexcept {
    try {
        answer(fd, offered, out);
    } catch (...) {
        out.rdma = false;
        out.outcome = Outcome::SetupError;
        set_reason(out, "out of memory");
        leave_setup_gate();  // does nothing without a place
    }
    // No session follows: the client sees the end at once.
    (void)::shutdown(fd, SHUT_RDWR);
}

}  // namespace pg_rdma::server
