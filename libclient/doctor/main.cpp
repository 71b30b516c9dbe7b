// pgrdma doctor [--timeout SECONDS] [--quiet] TARGET
// pgrdma doctor --server [--quiet] CONNINFO
//
// Can this client use RDMA to that server, and if not, why not? Reports
// this host's RDMA devices, provider libraries, limits and the route to
// the server, then probes the server: a TCP connection, the RDMA setup a
// session would make and an echo over it, without starting a PostgreSQL
// session. Ends with one verdict and an exit code by where the cause lies
// (verdict.hpp). Runs without libpq_rdma.so: it uses the transport itself.
// With --server it asks the running server to check its own side instead
// (server_report.hpp).
#include <netdb.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "libclient/doctor/local_facts.hpp"
#include "libclient/doctor/probe_run.hpp"
#include "libclient/doctor/server_report.hpp"
#include "libclient/doctor/target.hpp"
#include "libclient/doctor/verdict.hpp"

namespace {

using namespace pg_rdma::doctor;

constexpr int kDefaultTimeoutSeconds = 10;  // as a session's pg_rdma connect_timeout
constexpr int kMaxTimeoutSeconds = 600;

void usage(std::FILE* to) {
    std::fprintf(to,
                 "usage: pgrdma doctor [--timeout SECONDS] [--quiet] TARGET\n"
                 "       pgrdma doctor --server [--quiet] CONNINFO\n"
                 "  TARGET: HOST, HOST:PORT, [IPV6]:PORT, a conninfo string (\"host=db1 port=5433\") or a\n"
                 "          postgresql:// URI; PGHOST, PGHOSTADDR and PGPORT fill in what it leaves out\n"
                 "  --timeout SECONDS  for the whole run: TCP connection, route, probe (default %d;\n"
                 "                     --server: the connection)\n"
                 "  --quiet            print the verdict only (--server: and the checks that are not ok)\n"
                 "  --server           the running server checks its own side (pg_rdma_check_server():\n"
                 "                     listen addresses, limits, caps), asked over plain libpq\n"
                 "exit: 0 RDMA works, 1 a cause on this host, 2 usage, 3 the server declined or did not\n"
                 "      answer, 4 the network (RDMA connection or echo), 5 the server has no pg_rdma (or\n"
                 "      is no PostgreSQL), 6 no TCP connection to the server; --server: 0 no problem,\n"
                 "      2 a role that may not run the check, 3 a problem, 5 no pg_rdma_check_server(),\n"
                 "      6 no connection\n",
                 kDefaultTimeoutSeconds);
}

// "10.0.0.5:5432", "[fd00::5]:5432", with the name given when it was one:
// "10.0.0.5:5432 (db1)". `connected`: the address the probe reached.
std::string server_label(const Target& t, const std::string& connected) {
    const std::string& address = connected.empty() ? t.address : connected;
    const bool v6 = address.find(':') != std::string::npos;
    std::string label = (v6 ? "[" + address + "]" : address) + ":" + t.port;
    if (t.host != address) label += " (" + t.host + ")";
    return label;
}

void print_facts(const Facts& f) {
    std::printf("server:      %s\n", f.server.c_str());
    if (f.devices.ports.empty()) std::printf("devices:     none\n");
    for (const PortFacts& p : f.devices.ports)
        std::printf("device:      %s port %d %s, %s, MTU %d%s%s\n", p.device.c_str(), p.port, p.state.c_str(),
                    p.link_layer.c_str(), p.mtu, p.netdev.empty() ? "" : ", netdev ", p.netdev.c_str());
    for (const std::string& name : f.devices.without_provider)
        std::printf("device:      %s has no provider library that opens it\n", name.c_str());
    for (const std::string& name : f.devices.unopenable)
        std::printf("device:      %s cannot be opened\n", name.c_str());
    std::printf("limits:      memlock %s (a session needs %s), descriptors %llu\n",
                f.limits.memlock_unlimited ? "unlimited" : format_bytes(f.limits.memlock).c_str(),
                format_bytes(f.limits.session_pins).c_str(), static_cast<unsigned long long>(f.limits.descriptors));
    if (f.route.resolved)
        std::printf("route:       via %s port %d from %s%s%s\n", f.route.device.c_str(), f.route.port,
                    f.route.source.c_str(), f.route.gid_type.empty() ? "" : ", GID type ", f.route.gid_type.c_str());
    else
        std::printf("route:       no RDMA route%s%s%s%s\n", f.route.egress.empty() ? "" : " (IP route leaves by ",
                    f.route.egress.c_str(), f.route.egress.empty() ? "" : ")",
                    f.route.error.empty() ? "" : ("; " + f.route.error).c_str());
    const ProbeRun& p = f.probe;
    if (p.end != ProbeEnd::TcpFailed) std::printf("tcp:         connected in %.1f ms\n", p.tcp_ms);
    if (p.end == ProbeEnd::Works)
        std::printf("probe:       RDMA set up in %.1f ms on %s; %d round trips of %zu bytes, median %.0f us; "
                    "%zu KiB echoed\n",
                    p.setup_ms, p.device.c_str(), kRoundTrips, kRoundTripBytes, p.round_trip_us,
                    static_cast<std::size_t>(p.bulk_bytes / 1024));
    else
        std::printf("probe:       %s%s%s\n", to_string(p.end), p.error.empty() ? "" : ": ", p.error.c_str());
}

}  // namespace

int main(int argc, char** argv) {
    int timeout_s = kDefaultTimeoutSeconds;
    bool quiet = false;
    bool server_side = false;
    const char* target_text = nullptr;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--help" || arg == "-h") return usage(stdout), kExitWorks;
        if (arg == "--quiet" || arg == "-q") {
            quiet = true;
        } else if (arg == "--server") {
            server_side = true;
        } else if (arg == "--timeout" && i + 1 < argc) {
            char* end = nullptr;
            const long v = std::strtol(argv[++i], &end, 10);
            if (end == argv[i] || *end != '\0' || v < 1 || v > kMaxTimeoutSeconds) {
                std::fprintf(stderr, "pgrdma doctor: --timeout takes 1..%d seconds\n", kMaxTimeoutSeconds);
                return kExitUsage;
            }
            timeout_s = static_cast<int>(v);
        } else if (!arg.empty() && arg[0] == '-') {
            std::fprintf(stderr, "pgrdma doctor: unknown option %s\n", argv[i]);
            return usage(stderr), kExitUsage;
        } else if (target_text == nullptr) {
            target_text = argv[i];
        } else {
            std::fprintf(stderr, "pgrdma doctor: one target at a time\n");
            return usage(stderr), kExitUsage;
        }
    }
    if (server_side) return report_server(target_text != nullptr ? target_text : "", timeout_s, quiet);
    std::string error;
    const auto target = parse_target(target_text != nullptr ? target_text : "",
                                     Defaults{std::getenv("PGHOST"), std::getenv("PGHOSTADDR"), std::getenv("PGPORT")},
                                     error);
    if (!target) {
        std::fprintf(stderr, "pgrdma doctor: %s\n", error.c_str());
        return usage(stderr), kExitUsage;
    }
    // One deadline for the whole run: the TCP connection, the route, the probe.
    const Clock::time_point until = Clock::now() + std::chrono::seconds(timeout_s);
    Facts facts;
    facts.timeout_ms = timeout_s * 1000;
    facts.devices = gather_devices();
    facts.limits = gather_limits();
    const TcpLink link = connect_tcp(target->address, target->port, until);
    facts.server =
        server_label(*target, link.fd.valid() ? numeric_host(reinterpret_cast<const sockaddr*>(&link.peer)) : "");
    // The route the probe's own connection takes: from its local address
    // to the address it reached.
    if (facts.devices.ports.empty())
        facts.route.error = "no RDMA device on this host";
    else if (link.fd.valid())
        facts.route = resolve_route(reinterpret_cast<const sockaddr*>(&link.peer),
                                    reinterpret_cast<const sockaddr*>(&link.local), until);
    else
        facts.route.error = "no TCP connection to follow";
    facts.probe = run_probe(link, until);
    const Verdict verdict = decide(facts);
    if (!quiet) {
        print_facts(facts);
        if (target->more_hosts) std::printf("note:        of the hosts listed, the first was checked\n");
    }
    std::printf("verdict:     %s\n", verdict.text.c_str());
    if (!verdict.fix.empty()) std::printf("fix:         %s\n", verdict.fix.c_str());
    std::printf("cause:       %s (exit %d)\n", verdict.cause.c_str(), verdict.exit_code);
    return verdict.exit_code;
}
