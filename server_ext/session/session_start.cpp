// Deciding a backend's session on its first read, and what the server says
// about it: the pg_stat_rdma row and the log lines.
//
// PostgreSQL errors are raised only from the small C-style functions at the
// bottom, which hold no C++ object: the deciding code fills a Report and
// returns, then the report is made.
#include <poll.h>
#include <sys/socket.h>

#include <netdb.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "server_ext/session/backend_session.hpp"
#include "server_ext/session/first_packet.hpp"
#include "server_ext/session/hba_precheck.hpp"
#include "server_ext/session/output_batching.hpp"
#include "server_ext/session/probe_answer.hpp"
#include "server_ext/session/rdma_address.hpp"
#include "server_ext/session/real_calls.hpp"
#include "server_ext/settings_gucs.hpp"
#include "server_ext/setup_gate.hpp"
#include "server_ext/stat_slots.hpp"
#include "server_ext/stat_totals.hpp"
#include "transport/directory.hpp"
#include "transport/tcp_upgrade.hpp"

#include "server_ext/pg_headers.hpp"
#include "server_ext/pg_compat.hpp"

namespace pg_rdma::server {
namespace {

constexpr std::size_t kReasonSize = 512;  // bytes of a reason in a log line

// What start_session decided, for the C-style reporting below.
struct Report {
    enum Kind { None, Upgraded, StayedTcp, Declined, NotOffered, NotAccepting, HbaRejects, OverCap, Probe, Fatal } kind = None;
    char reason[kReasonSize] = {};
    int code = 0;  // Declined: the setup's errno value, for the counters
    char device[kStatFieldSize] = {};
    int protocol_version = 0;
    std::uint32_t rx_buffer_size = 0;
    int transport_descriptors = 0;  // opened by the upgrade, for PostgreSQL's count
    GateRefusal refusal;            // OverCap, HbaRejects
    ProbeAnswer probe;              // Probe
};

// Descriptors this process has open: the upgrade's are reported to
// PostgreSQL (ReserveExternalFD) so that fd.c's budget of max_files_per_process
// stays true. -1 when /proc cannot be read.
int open_descriptors() {
    const int n = pg_rdma::transport::count_entries("/proc/self/fd");
    return n < 0 ? -1 : n - 1;  // the directory's own descriptor
}

void set_reason(Report& r, const std::string& why) {
    snprintf(r.reason, sizeof r.reason, "%s", why.c_str());
}

// The client's numeric address and port, as pg_stat_rdma stores them.
void client_address(char (&host)[NI_MAXHOST], int& port) {
    char service[NI_MAXSERV] = {};
    host[0] = '\0';
    port = 0;
    if (getnameinfo(reinterpret_cast<const sockaddr*>(&MyProcPort->raddr.addr), MyProcPort->raddr.salen, host,
                    sizeof host, service, sizeof service, NI_NUMERICHOST | NI_NUMERICSERV) == 0)
        port = std::atoi(service);
    // A link-local peer comes with its zone ("fe80::1%eth0"), which type
    // inet rejects: one such row would make every read of pg_stat_rdma
    // fail. Dropped, as pg_stat_activity's client_addr drops it.
    if (char* zone = std::strchr(host, '%')) *zone = '\0';
}

// Remembers the row; it is claimed after authentication (row_claim.cpp).
// Not now: until InitProcess a backend ends with _exit(1) on
// authentication_timeout or SIGTERM (PostgreSQL's startup-packet handlers),
// running no exit callback, and a row claimed now would outlive it.
void track_session(const Report& r, SessionTransport transport, bool requested) {
    BackendSession& s = backend_session();
    char host[NI_MAXHOST];
    int port = 0;
    client_address(host, port);
    snprintf(s.row.client_addr, sizeof s.row.client_addr, "%s", host);
    s.row.client_port = port;
    s.row.transport = transport;
    snprintf(s.row.device, sizeof s.row.device, "%s", r.device);
    s.row.protocol_version = r.protocol_version;
    s.row.rx_buffer_size = r.rx_buffer_size;
    s.row.requested = requested;
    snprintf(s.row.reason, sizeof s.row.reason, "%s", transport == SessionTransport::Tcp ? r.reason : "");
    s.tracked = true;
}

// Decides; fills `report`. Never raises a PostgreSQL error.
bool decide(int fd, Report& report) noexcept {
    BackendSession& s = backend_session();
    try {
        const bool offered = offers_rdma(reinterpret_cast<const sockaddr*>(&MyProcPort->laddr.addr));
        switch (take_first_packet(fd)) {
            case FirstPacket::NotYet: return false;
            case FirstPacket::Other:
                s.phase = SessionPhase::Tcp;
                s.client_fd = fd;
                if (offered) {
                    report.kind = Report::StayedTcp;
                    track_session(report, SessionTransport::Tcp, false);
                }
                s.pending.clear();
                return true;
            case FirstPacket::Cancel:
            case FirstPacket::Empty:
                // Not a session: no row, no log line of ours.
                s.phase = SessionPhase::Tcp;
                s.client_fd = fd;
                s.pending.clear();
                return true;
            case FirstPacket::Probe:
                // Not a session: no row; answered, then PostgreSQL reads
                // an end of stream.
                s.phase = SessionPhase::Probed;
                s.client_fd = fd;
                s.pending.clear();
                answer_probe(fd, offered, report.probe);
                report.kind = Report::Probe;
                return true;
            case FirstPacket::Upgrade: break;
        }
        s.client_fd = fd;
        // A backend the postmaster started only to refuse the session (too
        // many clients, starting up, shutting down) does not build a queue
        // pair to say so: the client hears PostgreSQL's refusal on TCP.
        const bool accepting = !compat::backend_started_to_refuse();
        if (!offered || !accepting) {
            s.phase = SessionPhase::Tcp;
            s.pending.clear();
            report.kind = offered ? Report::NotAccepting : Report::NotOffered;
            const char* why = offered ? "" : "this address is not in pg_rdma.listen_addresses";
            set_reason(report, why);
            if (!send_decline(fd))
                set_reason(report, std::string(why) + (offered ? "" : "; ") + "the decline could not be sent");
            // The client asked on an address without RDMA: its session gets
            // a row that says so (a refused one never reaches its row).
            if (!offered) track_session(report, SessionTransport::Tcp, true);
            return true;
        }
        // An address no line of pg_hba.conf could admit: PostgreSQL will
        // refuse it whatever it sends, and says so on TCP; nothing pinned.
        const HbaPrecheck hba = precheck_hba(MyProcPort->raddr.addr);
        if (!hba.could_admit) {
            s.phase = SessionPhase::Tcp;
            s.pending.clear();
            report.kind = Report::HbaRejects;
            char why[160];
            if (hba.line > 0)
                snprintf(why, sizeof why, "no line of pg_hba.conf admits this address (rejected by line %d)", hba.line);
            else
                snprintf(why, sizeof why, "no line of pg_hba.conf matches this address");
            count_decline(why, report.refusal);
            if (!send_decline(fd)) set_reason(report, "the decline could not be sent");
            return true;
        }
        // Nothing is pinned for a stranger beyond the server-wide caps.
        if (!enter_setup_gate(session_pinned_bytes(), report.refusal)) {
            s.phase = SessionPhase::Tcp;
            s.pending.clear();
            report.kind = Report::OverCap;
            set_reason(report, report.refusal.why);
            if (!send_decline(fd)) set_reason(report, "the decline could not be sent");
            track_session(report, SessionTransport::Tcp, true);
            return true;
        }
        const RealCalls& real = real_calls();
        const int descriptors_before = open_descriptors();
        transport::UpgradeResult result =
            transport::upgrade_server(fd, settings_from_gucs(), transport::TcpIo{real.send, real.recv});
        const int descriptors_after = open_descriptors();
        if (descriptors_before >= 0 && descriptors_after > descriptors_before)
            report.transport_descriptors = descriptors_after - descriptors_before;
        switch (result.outcome) {
            case transport::UpgradeOutcome::Rdma: {
                auto session = std::make_unique<RdmaSession>(fd, std::move(result.connection));
                if (!session->adopt(s.pending)) {
                    report.kind = Report::Fatal;
                    set_reason(report, std::string("epoll_ctl could not move the session's waits onto RDMA: ") +
                                           strerror(errno));
                    return true;
                }
                const transport::ConnectionStats stats = session->connection()->stats();
                snprintf(report.device, sizeof report.device, "%s",
                              session->connection()->device_name().c_str());
                report.protocol_version = stats.protocol_version;
                report.rx_buffer_size = stats.rx_buffer_size;
                s.rdma = std::move(session);
                s.phase = SessionPhase::Rdma;
                install_output_batching();
                s.pending.clear();
                report.kind = Report::Upgraded;
                track_session(report, SessionTransport::Rdma, true);
                return true;
            }
            case transport::UpgradeOutcome::TcpSame:
                leave_setup_gate();  // nothing of RDMA is held any more
                s.phase = SessionPhase::Tcp;
                s.pending.clear();
                report.kind = Report::Declined;
                report.code = result.error.code;
                set_reason(report, result.error.message);
                track_session(report, SessionTransport::Tcp, true);
                return true;
            case transport::UpgradeOutcome::TcpReconnect:
            case transport::UpgradeOutcome::Failed: break;
        }
        report.kind = Report::Fatal;
        set_reason(report, result.error.message);
    } catch (...) {
        report.kind = Report::Fatal;
        set_reason(report, "out of memory");
    }
    return true;
}

/* ---- C-style reporting: no C++ object is alive in these frames ---- */

void log_session_end(int, Datum);
void count_session_bytes(int, Datum);

// The period a DETAIL ends with, unless the reason has its own.
const char* full_stop(const char* reason) {
    const std::size_t n = std::strlen(reason);
    return n > 0 && reason[n - 1] == '.' ? "" : ".";
}

// What to do about a setup that fell back, for the log line's HINT;
// nullptr when the reason says all there is.
const char* decline_hint(Outcome outcome) {
    switch (outcome) {
        case Outcome::Memlock:
            return "Raise the server's memlock limit (LimitMEMLOCK=infinity in its systemd unit, or ulimit -l "
                   "where it is started).";
        case Outcome::NoDevice:
            return "List in pg_rdma.listen_addresses only addresses on an RDMA port (\"rdma link\" shows the "
                   "ports and their network devices).";
        case Outcome::Descriptors: return "Raise the server's descriptor limit (LimitNOFILE, or ulimit -n).";
        case Outcome::Timeout:
            return "With nothing received from the client, a firewall dropping RoCE v2 (UDP port 4791) on the "
                   "way is the usual cause; with many clients setting up at once, raise pg_rdma.connect_timeout.";
        case Outcome::ClientGaveUp: return "The client's own warning says why it gave up.";
        default: return nullptr;
    }
}

// What the counters (stat_totals.hpp) count a decision as.
std::optional<Outcome> outcome_of(const Report& r) {
    switch (r.kind) {
        case Report::None: return std::nullopt;
        case Report::Upgraded: return Outcome::Upgraded;
        case Report::StayedTcp: return Outcome::NotRequested;
        case Report::Declined: return classify_fallback(r.code);
        case Report::NotOffered: return Outcome::NotOffered;
        case Report::NotAccepting: return Outcome::NotAccepting;
        case Report::HbaRejects: return Outcome::HbaRejects;
        case Report::OverCap: return Outcome::OverCap;
        case Report::Probe: return Outcome::Probe;
        case Report::Fatal: return Outcome::SetupFailed;
    }
    return std::nullopt;
}

// The caps' and pg_hba.conf's declines: a crowd, or a flood of strangers,
// gets one line for many, at most every few seconds, both kinds under one
// limit (setup_gate.hpp decides whose turn it is). A rejected client that
// goes on also gets PostgreSQL's own refusal.
void log_gate_decline(bool hba, const GateRefusal& refusal, const char* host, const char* port) {
    if (!refusal.log_now) return;
    ereport(LOG, (errmsg("pg_rdma: declined %llu RDMA upgrade(s) since the last such line, the "
                         "latest from host=%s port=%s; those sessions continue on TCP",
                         static_cast<unsigned long long>(refusal.declined_since), host, port),
                  errdetail("%s; nothing was pinned for it.", refusal.why),
                  hba ? errhint("PostgreSQL refuses these clients whatever they send; if they should "
                                "connect, admit their address in pg_hba.conf and reload.")
                      : errhint("Raise pg_rdma.max_unauthenticated_sessions or "
                                "pg_rdma.max_unauthenticated_memory if these are your own clients "
                                "connecting at once.")));
}

void report_decision(const Report& r) {
    const char* host = MyProcPort->remote_host;
    const char* port = MyProcPort->remote_port;
    if (const std::optional<Outcome> outcome = outcome_of(r)) count_outcome(*outcome);
    if (r.kind == Report::Upgraded) count_device_session(r.device);
    switch (r.kind) {
        case Report::None: break;
        case Report::Upgraded:
            // The connection's descriptors stay open until the backend exits.
            for (int i = 0; i < r.transport_descriptors; ++i) ReserveExternalFD();
            if (compat::log_connection_receipt())
                ereport(LOG, (errmsg("pg_rdma: connection upgraded: with_rsocket=true host=%s port=%s device=%s "
                                     "protocol_version=%d rx_buffer_size=%u",
                                     host, port, r.device, r.protocol_version, r.rx_buffer_size)));
            break;
        case Report::StayedTcp:
            if (compat::log_connection_receipt())
                ereport(LOG, (errmsg("pg_rdma: connection on TCP: with_rsocket=false host=%s port=%s", host, port)));
            break;
        case Report::Declined: {
            // Every such session is counted and has its reason in its row;
            // the log says it once per kind every few seconds.
            const Outcome outcome = classify_fallback(r.code);
            std::uint64_t since = 0;
            if (!outcome_log_due(outcome, since)) break;
            const char* hint = decline_hint(outcome);
            if (since > 0)
                ereport(LOG, (errmsg("pg_rdma: RDMA not possible for host=%s port=%s; the session continues on TCP",
                                     host, port),
                              errdetail("%s%s %llu more session(s) fell back for the same cause since the last "
                                        "such line (pg_stat_rdma_outcomes counts them, pg_stat_rdma gives each "
                                        "one's reason).",
                                        r.reason, full_stop(r.reason), static_cast<unsigned long long>(since)),
                              hint != nullptr ? errhint("%s", hint) : 0));
            else
                ereport(LOG, (errmsg("pg_rdma: RDMA not possible for host=%s port=%s; the session continues on TCP",
                                     host, port),
                              errdetail("%s%s", r.reason, full_stop(r.reason)),
                              hint != nullptr ? errhint("%s", hint) : 0));
            break;
        }
        case Report::NotAccepting:
            ereport(LOG, (errmsg("pg_rdma: declined an RDMA upgrade from host=%s port=%s: the server is not "
                                 "accepting this session (starting up, shutting down or too many clients); its "
                                 "refusal follows on TCP%s%s",
                                 host, port, r.reason[0] != '\0' ? "; " : "", r.reason)));
            break;
        case Report::NotOffered:
            ereport(LOG, (errmsg("pg_rdma: declined an RDMA upgrade from host=%s port=%s: %s", host, port, r.reason)));
            break;
        case Report::HbaRejects:
        case Report::OverCap:
            log_gate_decline(r.kind == Report::HbaRejects, r.refusal, host, port);
            break;
        case Report::Probe:
            // A probe over a cap may be the decline whose turn it is to
            // log the caps' line for everyone.
            if (r.probe.outcome == Outcome::OverCap) log_gate_decline(false, r.probe.refusal, host, port);
            // A probe is a connection, logged as log_connections logs those.
            if (!compat::log_connection_receipt()) break;
            if (r.probe.rdma) {
                ereport(LOG, (errmsg("pg_rdma: answered an RDMA probe from host=%s port=%s: RDMA works (device %s, "
                                     "%llu bytes echoed)",
                                     host, port, r.probe.device, static_cast<unsigned long long>(r.probe.echoed))));
            } else {
                const std::string_view name = outcome_name(r.probe.outcome);  // no destructor: fine across ereport
                ereport(LOG, (errmsg("pg_rdma: answered an RDMA probe from host=%s port=%s: no RDMA (%.*s): %s", host,
                                     port, static_cast<int>(name.size()), name.data(), r.probe.reason)));
            }
            break;
        case Report::Fatal:
            // The client is mid-handshake: an ErrorResponse on the TCP
            // connection would be read as garbage. Log only.
            whereToSendOutput = DestNone;
            ereport(FATAL, (errcode(ERRCODE_CONNECTION_FAILURE),
                            errmsg("pg_rdma: RDMA upgrade failed for host=%s port=%s: %s", host, port, r.reason)));
            break;
    }
}

// At the end of a session that started on RDMA: its bytes, both
// transports, under its device (pg_stat_rdma_devices).
void count_session_bytes(int, Datum) {
    publish_counters();
    const BackendSession& s = backend_session();
    count_device_bytes(s.row.device, s.bytes_sent, s.bytes_received);
}

void log_session_end(int, Datum) {
    if (!compat::log_disconnections()) return;
    const BackendSession& s = backend_session();
    long secs = 0;
    int usecs = 0;
    TimestampDifference(MyStartTimestamp, GetCurrentTimestamp(), &secs, &usecs);
    const long hours = secs / SECS_PER_HOUR;
    const long minutes = (secs % SECS_PER_HOUR) / SECS_PER_MINUTE;
    ereport(LOG, (errmsg("pg_rdma: disconnection: with_rsocket=%s session time: %ld:%02ld:%02ld.%03d host=%s "
                         "port=%s bytes_sent=%llu bytes_received=%llu",
                         s.rdma ? "true" : "false", hours, minutes, secs % SECS_PER_MINUTE, usecs / 1000,
                         MyProcPort->remote_host, MyProcPort->remote_port,
                         static_cast<unsigned long long>(s.bytes_sent),
                         static_cast<unsigned long long>(s.bytes_received))));
}

}  // namespace

BackendSession& backend_session() noexcept {
    // Never destroyed: exit() runs static destructors before the transport's
    // exit drain and any late socket call, and both still need the session.
    // The connection is drained and the process ends; nothing leaks past it.
    alignas(BackendSession) static unsigned char storage[sizeof(BackendSession)];
    static BackendSession* const session = new (storage) BackendSession;
    return *session;
}

bool start_session(int fd) {
    Report report;
    if (!decide(fd, report)) return false;
    report_decision(report);
    return true;
}

void publish_counters() {
    BackendSession& s = backend_session();
    if (s.phase == SessionPhase::Rdma && s.rdma && s.rdma->connection() != nullptr) {
        const transport::ConnectionStats stats = s.rdma->connection()->stats();
        s.bytes_sent = stats.bytes_sent;
        s.bytes_received = stats.bytes_received;
        if (stats.failed_over && !s.row.failed_over) note_failover();
    }
    if (s.shown) update_stat_counters(s.bytes_sent, s.bytes_received);
}

namespace {

SessionIdentity row_identity(const PendingRow& row) {
    SessionIdentity id;
    id.client_addr = row.client_addr;
    id.client_port = row.client_port;
    id.transport = row.transport;
    id.device = row.device;
    id.protocol_version = row.protocol_version;
    id.rx_buffer_size = row.rx_buffer_size;
    id.failed_over = row.failed_over;
    id.requested = row.requested;
    id.reason = row.reason;
    id.role = row.role;
    return id;
}

}  // namespace

void note_failover() {
    BackendSession& s = backend_session();
    count_outcome(Outcome::FailedOver);
    count_device_failover(s.row.device);
    s.row.failed_over = true;
    s.row.transport = SessionTransport::Tcp;
    char reason[kReasonSize];
    {
        const std::string why = s.rdma->connection()->failover_reason();
        snprintf(reason, sizeof reason, "%s", why.empty() ? "unknown" : why.c_str());
    }
    snprintf(s.row.reason, sizeof s.row.reason, "RDMA failed: %s; the session moved onto TCP", reason);
    if (s.shown) update_stat_identity(row_identity(s.row));
    // Server log only: this runs inside the backend's own sends, where a
    // message to the client cannot be added. Interrupts held: errfinish()
    // checks for them, and a pending cancel's ERROR would jump out of the
    // send hook after the bytes went, which PostgreSQL would send again.
    HOLD_INTERRUPTS();
    ereport(LOG_SERVER_ONLY,
            (errmsg("pg_rdma: RDMA session with host=%s port=%s moved onto TCP", MyProcPort->remote_host,
                    MyProcPort->remote_port),
             errdetail("RDMA failed: %s. The session goes on over its TCP connection, no byte lost.", reason),
             errhint("Check the RDMA device and link of this host and the client's (rdma link, ip link).")));
    RESUME_INTERRUPTS();
}

void claim_pending_row(std::uint32_t role) {
    BackendSession& s = backend_session();
    if (!s.tracked || s.shown) return;
    s.row.role = role;
    // As PostgreSQL's own log_disconnections: only for sessions that started.
    on_proc_exit(log_session_end, 0);
    if (s.rdma) on_proc_exit(count_session_bytes, 0);
    s.shown = claim_stat_slot(row_identity(s.row));
    publish_counters();  // the bytes of the handshake and authentication
}

namespace {

// Whether the client's TCP connection is closed or reset too: its process
// ended (killed, crashed) rather than its RDMA link failing. Looked at
// with poll, never read (poll is not one of the calls pg_rdma takes over).
bool tcp_peer_gone(int fd) {
    if (fd < 0) return false;
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace

void log_rdma_failure() {
    BackendSession& s = backend_session();
    if (s.failure_logged || !s.rdma || s.rdma->connection() == nullptr) return;
    // On TCP since a failover: what fails now is the TCP connection, which
    // PostgreSQL reports itself.
    if (s.row.failed_over || s.rdma->connection()->stats().failed_over) return;
    s.failure_logged = true;
    // A client that went without closing (killed, its host reset) has
    // closed its TCP connection too: not an RDMA failure, not counted.
    if (!tcp_peer_gone(s.client_fd)) count_outcome(Outcome::Failed);
    char reason[kReasonSize];
    {
        const std::string why = s.rdma->connection()->failure_reason();
        snprintf(reason, sizeof reason, "%s", why.empty() ? "the connection failed" : why.c_str());
    }
    HOLD_INTERRUPTS();  // as in note_failover: no ERROR out of the I/O hook
    ereport(LOG, (errmsg("pg_rdma: RDMA session with host=%s port=%s failed: %s", MyProcPort->remote_host,
                         MyProcPort->remote_port, reason)));
    RESUME_INTERRUPTS();
}

}  // namespace pg_rdma::server
