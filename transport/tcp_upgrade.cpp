// The upgrade exchange on the TCP connection (see tcp_upgrade.hpp).
#include "transport/tcp_upgrade.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "protocol/upgrade.hpp"
#include "transport/cm_events.hpp"
#include "transport/rdma_setup.hpp"

namespace pg_rdma::transport {
namespace {

using Deadline = SetupClock::time_point;

bool wait_fd(int fd, short events, Deadline deadline, Error& err) {
    pollfd p{fd, events, 0};
    for (;;) {
        const int rc = poll(&p, 1, ms_until(deadline));
        if (rc > 0) return true;
        if (rc == 0) return fail(err, ETIMEDOUT, "timed out on the TCP connection during the RDMA upgrade");
        if (errno != EINTR) return fail_errno(err, errno, "poll(TCP socket)");
    }
}

bool send_all(int fd, const std::uint8_t* p, std::size_t n, Deadline deadline, const TcpIo& io, Error& err) {
    while (n > 0) {
        const ssize_t w = io.send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= static_cast<std::size_t>(w);
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!wait_fd(fd, POLLOUT, deadline, err)) return false;
        } else if (w < 0 && errno != EINTR) {
            return fail_errno(err, errno, "send(TCP socket)");
        }
    }
    return true;
}

// Reads exactly n bytes; false with ECONNRESET if the peer closed first.
bool recv_exact(int fd, std::uint8_t* p, std::size_t n, Deadline deadline, const TcpIo& io, Error& err) {
    while (n > 0) {
        const ssize_t r = io.recv(fd, p, n, 0);
        if (r > 0) {
            p += r;
            n -= static_cast<std::size_t>(r);
        } else if (r == 0) {
            return fail(err, ECONNRESET, "the server closed the TCP connection during the RDMA upgrade");
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (!wait_fd(fd, POLLIN, deadline, err)) return false;
        } else if (errno != EINTR) {
            return fail_errno(err, errno, "recv(TCP socket)");
        }
    }
    return true;
}

UpgradeResult outcome(UpgradeOutcome o, Error err = {}) {
    UpgradeResult r;
    r.outcome = o;
    r.error = std::move(err);
    return r;
}

// What Prefer does instead of RDMA; Require always fails.
UpgradeResult fall_back(Mode mode, UpgradeOutcome prefer_outcome, Error err) {
    return outcome(mode == Mode::Prefer ? prefer_outcome : UpgradeOutcome::Failed, std::move(err));
}

sockaddr_storage endpoint_address(const protocol::RdmaEndpoint& ep) {
    sockaddr_storage out{};
    if (ep.family == 4) {
        auto* in = reinterpret_cast<sockaddr_in*>(&out);
        in->sin_family = AF_INET;
        in->sin_port = htons(ep.port);
        std::memcpy(&in->sin_addr, ep.address.data(), 4);
    } else {
        auto* in6 = reinterpret_cast<sockaddr_in6*>(&out);
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(ep.port);
        std::memcpy(&in6->sin6_addr, ep.address.data(), 16);
    }
    return out;
}

UpgradeResult client_after_accept(int fd, Mode mode, const Settings& settings, Deadline deadline, const TcpIo& io) {
    protocol::UpgradeAcceptBytes bytes{};
    bytes[0] = protocol::kReplyAccept;
    Error err;
    if (!recv_exact(fd, bytes.data() + 1, bytes.size() - 1, deadline, io, err))
        return outcome(UpgradeOutcome::Failed, err);
    const auto reply = protocol::decode_upgrade_reply(bytes);
    if (!reply.is_ok()) {
        fail(err, EPROTO, fmt::format("malformed RDMA upgrade reply from the server: {}", reply.error));
        return fall_back(mode, UpgradeOutcome::TcpReconnect, err);
    }
    const sockaddr_storage dst = endpoint_address(reply.value.endpoint);
    auto conn = connect(reinterpret_cast<const sockaddr*>(&dst), reply.value.endpoint.nonce, settings, err);
    if (!conn) return fall_back(mode, UpgradeOutcome::TcpSame, err);  // the server sees our TCP bytes and gives up too
    UpgradeResult r = outcome(UpgradeOutcome::Rdma);
    r.connection = std::move(conn);
    return r;
}

}  // namespace

const char* to_string(UpgradeOutcome o) {
    switch (o) {
        case UpgradeOutcome::Rdma: return "rdma";
        case UpgradeOutcome::TcpSame: return "tcp";
        case UpgradeOutcome::TcpReconnect: return "tcp-reconnect";
        case UpgradeOutcome::Failed: return "failed";
    }
    return "?";
}

UpgradeResult upgrade_client(int fd, Mode mode, const Settings& settings, const TcpIo& io) {
    const Deadline deadline = SetupClock::now() + settings.connect_timeout;
    Error err;
    if (!rdma_usable(settings, err)) return fall_back(mode, UpgradeOutcome::TcpSame, err);  // nothing sent yet
    const auto request = protocol::encode_upgrade_request();
    std::uint8_t tag = 0;
    if (!send_all(fd, request.data(), request.size(), deadline, io, err) ||
        !recv_exact(fd, &tag, 1, deadline, io, err)) {
        // A server that closes on our request without a word is not ours.
        return err.code == ECONNRESET ? fall_back(mode, UpgradeOutcome::TcpReconnect, err)
                                      : outcome(UpgradeOutcome::Failed, err);
    }
    switch (tag) {
        case protocol::kReplyAccept: return client_after_accept(fd, mode, settings, deadline, io);
        case protocol::kReplyDecline:
            fail(err, ECONNREFUSED, "the server declined RDMA for this session (its log says why)");
            return fall_back(mode, UpgradeOutcome::TcpSame, err);
        case protocol::kReplyError:
            fail(err, EPROTONOSUPPORT,
                 "the server does not support RDMA sessions (is pg_rdma in its shared_preload_libraries "
                 "and pg_rdma.listen_addresses set?)");
            return fall_back(mode, UpgradeOutcome::TcpReconnect, err);
        default:
            fail(err, EPROTO, fmt::format("unexpected reply 0x{:02x} to the RDMA upgrade request", tag));
            return fall_back(mode, UpgradeOutcome::TcpReconnect, err);
    }
}

namespace {

UpgradeResult decline(int fd, Deadline deadline, const TcpIo& io, Error why) {
    const std::uint8_t n = protocol::kReplyDecline;
    Error send_err;
    if (!send_all(fd, &n, 1, deadline, io, send_err)) return outcome(UpgradeOutcome::Failed, send_err);
    return outcome(UpgradeOutcome::TcpSame, std::move(why));
}

// The TCP connection's own addresses; the RDMA endpoint uses the local one,
// so the client reaches it the way it reached us, and must come from the peer.
bool tcp_addresses(int fd, sockaddr_storage& local, sockaddr_storage& peer, Error& err) {
    socklen_t len = sizeof local;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) return fail_errno(err, errno, "getsockname");
    len = sizeof peer;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return fail_errno(err, errno, "getpeername");
    if (local.ss_family == AF_INET6) {  // a dual-stack socket: IPv4 peers appear as ::ffff:a.b.c.d
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&local);
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
            sockaddr_in in{};
            in.sin_family = AF_INET;
            std::memcpy(&in.sin_addr, &in6->sin6_addr.s6_addr[12], 4);
            std::memcpy(&local, &in, sizeof in);
        }
    }
    if (local.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&local)->sin_port = 0;
    else if (local.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&local)->sin6_port = 0;
    else return fail(err, EAFNOSUPPORT, "RDMA sessions need an IP connection");
    return true;
}

protocol::RdmaEndpoint describe(const sockaddr_storage& bound, const protocol::Nonce& nonce) {
    protocol::RdmaEndpoint ep;
    ep.nonce = nonce;
    if (bound.ss_family == AF_INET) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(&bound);
        ep.family = 4;
        ep.port = ntohs(in->sin_port);
        std::memcpy(ep.address.data(), &in->sin_addr, 4);
    } else {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&bound);
        ep.family = 6;
        ep.port = ntohs(in6->sin6_port);
        std::memcpy(ep.address.data(), &in6->sin6_addr, 16);
    }
    return ep;
}

}  // namespace

UpgradeResult upgrade_server(int fd, const Settings& settings, const TcpIo& io) {
    const Deadline deadline = SetupClock::now() + settings.connect_timeout;
    Error err;
    sockaddr_storage local{}, peer{};
    if (!tcp_addresses(fd, local, peer, err) || !rdma_usable(settings, err)) return decline(fd, deadline, io, err);
    auto listener = Listener::create(reinterpret_cast<const sockaddr*>(&local), settings, err);
    if (!listener) return decline(fd, deadline, io, err);
    protocol::Nonce nonce{};
    if (!protocol::generate_nonce(nonce)) {
        fail(err, EIO, "RAND_bytes failed to produce a nonce");
        return decline(fd, deadline, io, err);
    }
    const auto reply = protocol::encode_upgrade_accept(describe(listener->local_address(), nonce));
    if (!send_all(fd, reply.data(), reply.size(), deadline, io, err)) return outcome(UpgradeOutcome::Failed, err);

    pollfd fds[2] = {{listener->fd(), POLLIN, 0}, {fd, POLLIN, 0}};
    int rc = 0;
    do {  // a signal (a backend's timeout alarm, say) is no reason to give up
        rc = poll(fds, 2, ms_until(deadline));
    } while (rc < 0 && errno == EINTR);
    if (rc > 0 && (fds[1].revents != 0) && fds[0].revents == 0) {
        fail(err, ECONNABORTED, "the client gave up on RDMA and continued on TCP");
        return outcome(UpgradeOutcome::TcpSame, err);
    }
    if (rc <= 0) {
        fail(err, ETIMEDOUT, "the client did not open the RDMA connection in time");
        return outcome(UpgradeOutcome::TcpSame, err);
    }
    auto conn = listener->accept(nonce, reinterpret_cast<const sockaddr*>(&peer), err);
    if (!conn) return outcome(UpgradeOutcome::TcpSame, err);
    UpgradeResult r = outcome(UpgradeOutcome::Rdma);
    r.connection = std::move(conn);
    return r;
}

}  // namespace pg_rdma::transport
