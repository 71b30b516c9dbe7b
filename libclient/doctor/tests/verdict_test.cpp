// pgrdma doctor's verdicts: each cause gives its own exit code, names
// itself for scripts, and says what to do.
#include "testing/catch.hpp"

#include <cerrno>

#include "libclient/doctor/verdict.hpp"

using namespace pg_rdma::doctor;

namespace {

Facts working_host() {
    Facts f;
    f.server = "10.0.0.5:5432";
    PortFacts port;
    port.device = "mlx5_0";
    port.port = 1;
    port.state = "ACTIVE";
    port.active = true;
    port.mtu = 4096;
    f.devices.ports.push_back(port);
    f.limits.memlock = 8 * 1024 * 1024;
    f.limits.session_pins = 400 * 1024;
    f.route.resolved = true;
    f.route.device = "mlx5_0";
    f.route.gid_type = "RoCE v2";
    f.route.mtu = 4096;
    return f;
}

}  // namespace

TEST_CASE("RDMA works: the device, the RoCE version, the MTU and the round trip") {
    Facts f = working_host();
    f.probe.end = ProbeEnd::Works;
    f.probe.device = "mlx5_0";
    f.probe.round_trip_us = 12.4;
    const Verdict v = decide(f);
    CHECK(v.exit_code == kExitWorks);
    CHECK(v.cause == "works");
    CHECK(v.text == "RDMA works to 10.0.0.5:5432 via mlx5_0 (RoCE v2, MTU 4096, round trip 12 \u00b5s)");
    CHECK(v.fix.empty());
}

TEST_CASE("each server decline is named server_ and its outcome, and gets its fix") {
    Facts f = working_host();
    f.probe.end = ProbeEnd::Declined;
    for (const char* outcome : {"not_offered", "memlock", "over_cap", "hba_rejects", "no_device", "not_accepting"}) {
        f.probe.decline = pg_rdma::protocol::ProbeDecline{outcome, "because"};
        const Verdict v = decide(f);
        CHECK(v.exit_code == kExitServer);
        CHECK(v.cause == std::string("server_") + outcome);
        CHECK(v.text.find(std::string("the server declined (") + outcome + "): because") != std::string::npos);
        CHECK_FALSE(v.fix.empty());
    }
    f.probe.decline = pg_rdma::protocol::ProbeDecline{"not_offered", ""};
    CHECK(decide(f).fix.find("pg_rdma.listen_addresses") != std::string::npos);
}

TEST_CASE("this host's memlock limit names both figures") {
    Facts f = working_host();
    f.limits.memlock = 64 * 1024;
    f.probe.end = ProbeEnd::LocalRefused;
    f.probe.code = ENOMEM;
    const Verdict v = decide(f);
    CHECK(v.exit_code == kExitThisHost);
    CHECK(v.cause == "memlock");
    CHECK(v.text.find("(64 KiB) is below what a session needs (400 KiB)") != std::string::npos);
}

TEST_CASE("no device at all, and devices no provider opens") {
    Facts f;
    f.server = "10.0.0.5:5432";
    f.probe.end = ProbeEnd::LocalRefused;
    f.probe.code = ENODEV;
    CHECK(decide(f).cause == "no_device");
    f.devices.in_sysfs = {"mlx5_0"};
    f.devices.without_provider = {"mlx5_0"};
    const Verdict v = decide(f);
    CHECK(v.cause == "no_provider");
    CHECK(v.fix.find("ibverbs-providers") != std::string::npos);
}

TEST_CASE("a route without an RDMA device names the interface it leaves by") {
    Facts f = working_host();
    f.route = RouteFacts{};
    f.route.egress = "lo (127.0.0.1)";
    f.probe.end = ProbeEnd::RdmaFailed;
    f.probe.code = EADDRNOTAVAIL;
    const Verdict v = decide(f);
    CHECK(v.exit_code == kExitThisHost);
    CHECK(v.cause == "no_route");
    CHECK(v.text.find("leaves by lo (127.0.0.1)") != std::string::npos);
}

TEST_CASE("an RDMA connection that times out while TCP works points at UDP 4791") {
    Facts f = working_host();
    f.probe.end = ProbeEnd::RdmaFailed;
    f.probe.code = ETIMEDOUT;
    const Verdict v = decide(f);
    CHECK(v.exit_code == kExitNetwork);
    CHECK(v.cause == "firewall");
    CHECK(v.fix.find("UDP port 4791") != std::string::npos);
}

TEST_CASE("a reason with control bytes is printed without them") {
    Facts f = working_host();
    f.probe.end = ProbeEnd::Declined;
    f.probe.decline = pg_rdma::protocol::ProbeDecline{"memlock", "line\nbreak\x1b[2J"};
    const Verdict v = decide(f);
    CHECK(v.text.find('\n') == std::string::npos);
    CHECK(v.text.find('\x1b') == std::string::npos);
}

TEST_CASE("what is not PostgreSQL is not called a server without pg_rdma") {
    Facts f = working_host();
    f.probe.end = ProbeEnd::NotPostgres;
    f.probe.error = "the server closed the TCP connection during the RDMA upgrade";
    const Verdict v = decide(f);
    CHECK(v.exit_code == kExitNoPgRdma);
    CHECK(v.cause == "not_postgresql");
}

TEST_CASE("devices that cannot be opened are not called missing") {
    Facts f;
    f.server = "10.0.0.5:5432";
    f.devices.in_sysfs = {"mlx5_0"};
    f.devices.unopenable = {"mlx5_0 (Permission denied)"};
    f.probe.end = ProbeEnd::LocalRefused;
    f.probe.code = ENODEV;
    const Verdict v = decide(f);
    CHECK(v.cause == "device_unopenable");
    CHECK(v.fix.find("/dev/infiniband/uverbs") != std::string::npos);
}

TEST_CASE("no pg_rdma, no server, no answer") {
    Facts f = working_host();
    f.probe.end = ProbeEnd::NoPgRdma;
    CHECK(decide(f).exit_code == kExitNoPgRdma);
    CHECK(decide(f).fix.find("shared_preload_libraries") != std::string::npos);
    f.probe.end = ProbeEnd::TcpFailed;
    f.probe.error = "TCP connection to 10.0.0.5 port 5432 failed: Connection refused";
    CHECK(decide(f).exit_code == kExitNoServer);
    CHECK(decide(f).text.find("Connection refused") != std::string::npos);
    f.probe.end = ProbeEnd::NoAnswer;
    CHECK(decide(f).exit_code == kExitServer);
}

TEST_CASE("byte counts read as a DBA writes them") {
    CHECK(format_bytes(64 * 1024) == "64 KiB");
    CHECK(format_bytes(8 * 1024 * 1024) == "8 MiB");
    CHECK(format_bytes(1536 * 1024) == "1.5 MiB");
    CHECK(format_bytes(100) == "100 bytes");
}
