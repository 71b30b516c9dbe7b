#include "libclient/doctor/verdict.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <map>

namespace pg_rdma::doctor {
namespace {

constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kMiB = 1024 * kKiB;

Verdict no_rdma(int code, std::string cause, const Facts& f, const std::string& why, std::string fix) {
    return {code, std::move(cause), "no RDMA to " + f.server + ": " + why, std::move(fix)};
}

// What to do about each way the server's pg_rdma declines (the outcome
// names of pg_stat_rdma_outcomes).
std::string server_fix(const std::string& outcome) {
    static const std::map<std::string, std::string> fixes = {
        {"not_offered",
         "on the server, add this address to pg_rdma.listen_addresses (an address on its RDMA port; \"rdma link\" "
         "shows which network devices carry RDMA) and restart it, or connect to an address that is listed"},
        {"no_device",
         "the address you reached has no RDMA device on the server: connect to the server's address on its RDMA "
         "network, and list only such addresses in pg_rdma.listen_addresses"},
        {"memlock",
         "raise the server's memlock limit: LimitMEMLOCK=infinity in PostgreSQL's systemd unit (or ulimit -l where "
         "it is started), then restart it"},
        {"descriptors", "raise the server's descriptor limit (LimitNOFILE, or ulimit -n), then restart it"},
        {"over_cap",
         "the server is at pg_rdma.max_unauthenticated_sessions or pg_rdma.max_unauthenticated_memory: sessions "
         "setting up at this moment fill it; try again, or raise the cap if your clients connect in crowds"},
        {"hba_rejects",
         "no line of the server's pg_hba.conf admits this host's address: add one and reload the server"},
        {"not_accepting",
         "the server is starting up, shutting down or at max_connections: try again when it accepts sessions"},
        {"timeout", "the server gave up on the RDMA setup: raise pg_rdma.connect_timeout if it is very busy"},
    };
    const auto it = fixes.find(outcome);
    return it != fixes.end() ? it->second
                             : "pg_stat_rdma_outcomes on the server counts it; with log_connections on, the "
                               "server's log has a line for each probe with its reason";
}

// What a peer sent, fit for one line of a terminal: control bytes shown
// as '?'.
std::string printable(const std::string& text) {
    std::string out = text;
    for (char& c : out)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    return out;
}

Verdict this_host(const Facts& f) {
    const LimitFacts& l = f.limits;
    if (f.devices.ports.empty() && !f.devices.unopenable.empty()) {
        std::string names;
        for (const std::string& n : f.devices.unopenable) names += (names.empty() ? "" : ", ") + n;
        return no_rdma(kExitThisHost, "device_unopenable", f, "RDMA device(s) " + names + " cannot be opened",
                       "check the permissions of /dev/infiniband/uverbs* for this user (the rdma group, or udev "
                       "rules)");
    }
    if (f.devices.ports.empty()) {
        if (!f.devices.without_provider.empty()) {
            std::string names;
            for (const std::string& n : f.devices.without_provider) names += (names.empty() ? "" : ", ") + n;
            return no_rdma(kExitThisHost, "no_provider", f,
                           "RDMA device(s) " + names + " exist but no verbs provider library opens them",
                           "install rdma-core's provider libraries (Debian: ibverbs-providers) matching the NIC");
        }
        return no_rdma(kExitThisHost, "no_device", f, "this host has no RDMA device",
                       "load the NIC's RDMA driver; for Soft-RoCE: rdma link add rxe0 type rxe netdev <interface>");
    }
    switch (f.probe.code) {
        case ENOMEM:
            return no_rdma(kExitThisHost, "memlock", f,
                           "this host's memlock limit (" + format_bytes(l.memlock) + ") is below what a session needs (" +
                               format_bytes(l.session_pins) + ")",
                           "raise the memlock limit of the programs that connect: ulimit -l, LimitMEMLOCK= in a "
                           "systemd unit, or /etc/security/limits.conf");
        case EMFILE:
        case ENFILE:
            return no_rdma(kExitThisHost, "descriptors", f, "this process is out of file descriptors",
                           "raise the descriptor limit (ulimit -n)");
        default: break;
    }
    return no_rdma(kExitThisHost, "local_setup", f, f.probe.error, "see the message above");
}

Verdict no_route(const Facts& f) {
    std::string why = "no RDMA device for the route to it";
    if (!f.route.egress.empty()) why += ": the route leaves by " + f.route.egress + ", which is not an RDMA port";
    else if (!f.route.error.empty()) why += " (" + f.route.error + ")";
    return no_rdma(kExitThisHost, "no_route", f, why,
                   "connect to the server's address on the network its RDMA port is on (\"rdma link\" on both hosts "
                   "shows which network devices carry RDMA)");
}

}  // namespace

std::string format_bytes(std::uint64_t bytes) {
    char out[32];
    if (bytes >= kMiB && bytes % kMiB == 0)
        std::snprintf(out, sizeof out, "%llu MiB", static_cast<unsigned long long>(bytes / kMiB));
    else if (bytes >= kMiB)
        std::snprintf(out, sizeof out, "%.1f MiB", static_cast<double>(bytes) / kMiB);
    else if (bytes >= kKiB)
        std::snprintf(out, sizeof out, "%llu KiB", static_cast<unsigned long long>((bytes + kKiB - 1) / kKiB));
    else
        std::snprintf(out, sizeof out, "%llu bytes", static_cast<unsigned long long>(bytes));
    return out;
}

Verdict decide(const Facts& f) {
    const ProbeRun& p = f.probe;
    switch (p.end) {
        case ProbeEnd::TcpFailed:
            return no_rdma(kExitNoServer, "no_server", f, p.error,
                           "check the host and port, and that PostgreSQL listens there (listen_addresses, and "
                           "any firewall on TCP)");
        case ProbeEnd::LocalRefused: return this_host(f);
        case ProbeEnd::NotPostgres:
            return no_rdma(kExitNoPgRdma, "not_postgresql", f,
                           "what listens there is not a PostgreSQL server: " + printable(p.error),
                           "check the port; a TCP proxy or load balancer in front of PostgreSQL must pass the "
                           "connection through untouched");
        case ProbeEnd::NoPgRdma:
            return no_rdma(kExitNoPgRdma, "no_pg_rdma", f, "the server answers without pg_rdma",
                           "on the server: shared_preload_libraries = 'pg_rdma' and pg_rdma.listen_addresses set to "
                           "its RDMA address, then a restart (a pg_rdma older than extension 0.3 does not answer "
                           "probes: its sessions may still use RDMA)");
        case ProbeEnd::Declined: {
            const protocol::ProbeDecline& d = *p.decline;
            return no_rdma(kExitServer, "server_" + d.outcome, f,
                           "the server declined (" + d.outcome + "): " + printable(d.reason), server_fix(d.outcome));
        }
        case ProbeEnd::NoAnswer:
            return no_rdma(kExitServer, "no_answer", f, p.error,
                           "the server is slow to start backends (overloaded?), or something other than PostgreSQL "
                           "listens there");
        case ProbeEnd::RdmaFailed:
            if (!f.route.resolved) return no_route(f);
            if (p.code == ETIMEDOUT)
                return no_rdma(kExitNetwork, "firewall", f,
                               "the RDMA connection to the server's RDMA port timed out, while TCP to it works",
                               "a firewall dropping RoCE v2 (UDP port 4791) on either host or between them is the "
                               "usual cause: allow UDP 4791 both ways (or the server was too busy to answer in time)");
            return no_rdma(kExitNetwork, "rdma_connect", f, "the RDMA connection failed: " + printable(p.error),
                           "check both hosts' RDMA ports (rdma link) and the link between them");
        case ProbeEnd::EchoFailed:
            return no_rdma(kExitNetwork, "echo", f, "RDMA connected, but the echo failed: " + printable(p.error),
                           "the link loses or damages packets: check the path MTU and, for RoCE, the switches' "
                           "lossless settings (PFC/ECN)");
        case ProbeEnd::Works: break;
    }
    char rtt[32];
    std::snprintf(rtt, sizeof rtt, "%.0f", std::round(p.round_trip_us));
    std::string how = f.route.gid_type.empty() ? std::string("RDMA") : f.route.gid_type;
    if (f.route.mtu > 0) how += ", MTU " + std::to_string(f.route.mtu);
    how += std::string(", round trip ") + rtt + " \u00b5s";
    return {kExitWorks, "works", "RDMA works to " + f.server + " via " + p.device + " (" + how + ")", ""};
}

}  // namespace pg_rdma::doctor
