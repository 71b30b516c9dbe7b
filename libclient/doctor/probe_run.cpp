#include "libclient/doctor/probe_run.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "transport/setup_step.hpp"
#include "transport/event_set.hpp"
#include "transport/upgrade_io.hpp"

namespace pg_rdma::doctor {
namespace {

double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}


// Writes all of `bytes` and reads as many back, interleaved (the server
// echoes as it reads). false with `error` when the connection failed, the
// echo differs, or `until` passed.
bool echo(transport::Connection& c, const std::vector<std::uint8_t>& bytes, Clock::time_point until,
          std::string& error) {
    std::vector<std::uint8_t> back(bytes.size());
    std::size_t sent = 0, received = 0;
    while (received < bytes.size()) {
        if (transport::ms_until(until) == 0) return error = "the echo did not come back in time", false;
        bool progress = false;
        if (sent < bytes.size()) {
            const ssize_t n = c.write(bytes.data() + sent, bytes.size() - sent);
            if (n > 0) sent += static_cast<std::size_t>(n), progress = true;
            else if (n < 0 && errno != EAGAIN) return error = std::string("writing: ") + strerror(errno), false;
        }
        const ssize_t n = c.read(back.data() + received, back.size() - received);
        if (n > 0) received += static_cast<std::size_t>(n), progress = true;
        else if (n == 0) return error = "the server closed the RDMA connection before the echo was back", false;
        else if (errno != EAGAIN) return error = std::string("reading: ") + strerror(errno), false;
        if (!progress) (void)c.wait(sent < bytes.size() ? POLLIN | POLLOUT : POLLIN, std::min(transport::ms_until(until), 100));
    }
    if (back != bytes) return error = "the echo came back different from what was sent", false;
    // A queue pair that failed under the echo moves the stream onto TCP,
    // where it completes: that is no RDMA that works.
    if (c.stats().failed_over)
        return error = "RDMA failed during the echo and the stream moved onto TCP: " + c.failover_reason(), false;
    return true;
}

void measure(transport::Connection& c, Clock::time_point until, ProbeRun& run) {
    std::vector<double> trips;
    std::vector<std::uint8_t> small(kRoundTripBytes);
    for (int i = 0; i < kRoundTrips; ++i) {
        std::fill(small.begin(), small.end(), static_cast<std::uint8_t>(i));
        const auto start = Clock::now();
        if (!echo(c, small, until, run.error)) return;
        trips.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
    std::sort(trips.begin(), trips.end());
    run.round_trip_us = trips[trips.size() / 2];
    std::vector<std::uint8_t> bulk(kBulkBytes);
    for (std::size_t i = 0; i < bulk.size(); ++i) bulk[i] = static_cast<std::uint8_t>(i * 7 + 3);
    if (!echo(c, bulk, until, run.error)) return;
    run.bulk_bytes = bulk.size();
    // Done: the server sees our end of stream and closes its side.
    (void)c.shutdown(SHUT_WR);
    std::array<std::uint8_t, 64> rest{};
    while (transport::ms_until(until) > 0) {
        const ssize_t n = c.read(rest.data(), rest.size());
        if (n == 0) break;
        if (n > 0) return run.error = "the server echoed more than was sent", void();
        if (errno != EAGAIN) break;  // its close may race ours: the echo is whole
        (void)c.wait(POLLIN, std::min(transport::ms_until(until), 100));
    }
    run.end = ProbeEnd::Works;
}

}  // namespace

TcpLink connect_tcp(const std::string& address, const std::string& port, Clock::time_point until) {
    TcpLink link;
    const auto start = Clock::now();
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_ADDRCONFIG;
    addrinfo* list = nullptr;
    if (const int rc = getaddrinfo(address.c_str(), port.c_str(), &hints, &list); rc != 0) {
        link.error = "cannot resolve \"" + address + "\": " + gai_strerror(rc);
        link.code = EHOSTUNREACH;
        return link;
    }
    for (const addrinfo* a = list; a != nullptr && !link.fd.valid(); a = a->ai_next) {
        transport::FileDescriptor fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
        if (!fd.valid()) continue;
        int rc = ::connect(fd.get(), a->ai_addr, a->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
            pollfd p{fd.get(), POLLOUT, 0};
            rc = ::poll(&p, 1, transport::ms_until(until));
            int soerr = ETIMEDOUT;
            socklen_t len = sizeof soerr;
            if (rc > 0) (void)getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &soerr, &len);
            errno = soerr;
            rc = soerr == 0 ? 0 : -1;
        }
        if (rc != 0) {
            link.code = errno;
            link.error = "TCP connection to " + address + " port " + port + " failed: " + strerror(errno);
            continue;
        }
        socklen_t len = sizeof link.local;
        (void)getsockname(fd.get(), reinterpret_cast<sockaddr*>(&link.local), &len);
        len = sizeof link.peer;
        (void)getpeername(fd.get(), reinterpret_cast<sockaddr*>(&link.peer), &len);
        link.fd = std::move(fd);
        link.error.clear();
        link.code = 0;
    }
    freeaddrinfo(list);
    link.ms = ms_since(start);
    return link;
}

ProbeRun run_probe(const TcpLink& link, Clock::time_point until) {
    ProbeRun run;
    if (!link.fd.valid()) {
        run.error = link.error;
        run.code = link.code;
        return run;
    }
    run.tcp_ms = link.ms;
    transport::Settings settings;
    settings.connect_timeout = transport::Millis{std::max(transport::ms_until(until), 1)};
    const auto setup_start = Clock::now();
    transport::ClientUpgrade upgrade(link.fd.get(), transport::Mode::Require, settings, transport::TcpIo{},
                                     transport::ClientUpgrade::Limits{until, until}, transport::Request::Probe);
    transport::ClientUpgrade::Stage stage = upgrade.stage();
    transport::UpgradeResult result;
    for (;;) {
        stage = upgrade.stage();
        if (upgrade.step() == transport::StepStatus::Done) {
            result = upgrade.take_result();
            break;
        }
        transport::Error err;
        if (!transport::wait_for(upgrade.want(), upgrade.deadline(), err)) {
            result.error = std::move(err);
            break;
        }
    }
    run.code = result.error.code;
    run.error = result.error.message;
    if (result.outcome != transport::UpgradeOutcome::Rdma) {
        const UpgradeStage where = stage == transport::ClientUpgrade::Stage::SendingRequest ? UpgradeStage::Requesting
                                   : stage == transport::ClientUpgrade::Stage::AwaitingReply ? UpgradeStage::AwaitingReply
                                                                                             : UpgradeStage::Connecting;
        run.end = classify_probe_end(where, run.code, result.probe_decline.has_value());
        run.decline = result.probe_decline;
        return run;
    }
    run.setup_ms = ms_since(setup_start);
    run.device = result.connection->device_name();
    run.error.clear();
    run.code = 0;
    run.end = ProbeEnd::EchoFailed;
    measure(*result.connection, until, run);
    return run;
}

}  // namespace pg_rdma::doctor
