#include "libclient/preload/first_write.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <span>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "libclient/preload/driver_policy.hpp"
#include "libclient/preload/epoll_registry.hpp"
#include "libclient/preload/libc_calls.hpp"
#include "libclient/preload/pq_messages.hpp"
#include "libclient/preload/session_moves.hpp"
#include "protocol/session_opener.hpp"
#include "protocol/upgrade.hpp"
#include "transport/tcp_upgrade.hpp"

namespace pg_rdma::client {
namespace {

using transport::Deadline;
using transport::StepStatus;
using transport::UpgradeOutcome;

// Enough of a first write to judge it: a PostgreSQL packet's length and
// code; a whole TLS record for a ClientHello.
constexpr std::size_t kHeaderBytes = 8;
constexpr std::size_t kStackClassifyBytes = 1024;  // a StartupMessage's usual size is a few hundred
constexpr std::size_t kClassifyBytes = 16 * 1024;
// How long the kept bytes may take to leave once the upgrade has ended
// (a fresh connection takes them at once; this bounds a broken one).
constexpr transport::Millis kHandOverTimeout{10'000};

std::string server_of(const SocketEntry& entry) {
    char text[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (entry.peer.ss_family == AF_INET) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(&entry.peer);
        inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
        port = ntohs(in->sin_port);
    } else if (entry.peer.ss_family == AF_INET6) {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&entry.peer);
        // An IPv4 server reached through an IPv6 socket (the JVM's) is named
        // as the program named it.
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
            inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], text, sizeof text);
        else
            inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
        port = ntohs(in6->sin6_port);
    }
    return std::string("server \"") + text + "\", port " + std::to_string(port);
}

void say_fallback(const SocketEntry& entry, std::string_view reason) noexcept {
    try {
        write_stderr("WARNING:  with_rsocket: RDMA is not possible for " + server_of(entry) + ": " +
                     std::string(reason) + "; continuing over TCP\n");
    } catch (...) {
        write_stderr("WARNING:  with_rsocket: RDMA is not possible; continuing over TCP\n");
    }
}

FirstWriteState fail(SocketEntry& entry, std::string_view reason) noexcept {
    entry.state = SocketState::Failed;
    // What a driver reports as "connection refused": the server cannot be
    // reached the way the policy demands.
    entry.failed_errno = ECONNREFUSED;
    try {
        write_stderr("WARNING:  with_rsocket=require: RDMA is not possible for " + server_of(entry) + ": " +
                     std::string(reason) + "; the connection fails\n");
    } catch (...) {
        write_stderr("WARNING:  with_rsocket=require: RDMA is not possible; the connection fails\n");
    }
    return FirstWriteState::Failed;
}

FirstWriteState broke(SocketEntry& entry, int code) noexcept {
    entry.state = SocketState::Failed;
    entry.failed_errno = code != 0 ? code : ECONNRESET;
    return FirstWriteState::Failed;
}

bool nonblocking(int fd) noexcept {
    const int flags = libc().fcntl(fd, F_GETFL);
    return flags >= 0 && (flags & O_NONBLOCK) != 0;
}

// Waits for `events` on `fd` until `until`: true when ready.
bool wait_fd(int fd, short events, Deadline until) noexcept {
    for (;;) {
        pollfd p{fd, events, 0};
        const int n = libc().poll(&p, 1, transport::ms_until(until));
        if (n > 0) return true;
        if (n == 0 || errno != EINTR) return false;
    }
}

// The kept bytes onto the TCP socket under `fd`: 0 or an errno.
int hand_over_tcp(int fd, SocketEntry& entry, Deadline until) noexcept {
    while (!entry.pending.empty()) {
        const ssize_t n = libc().send(fd, entry.pending.data(), entry.pending.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            entry.pending.erase(0, static_cast<std::size_t>(n));
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            if (!wait_fd(fd, POLLOUT, until)) return ETIMEDOUT;
        } else {
            return n < 0 ? errno : EPIPE;
        }
    }
    return 0;
}

// The kept bytes onto the session: 0 or an errno.
int hand_over_rdma(SocketEntry& entry, Deadline until) noexcept {
    while (!entry.pending.empty()) {
        const ssize_t n = entry.connection->write(entry.pending.data(), entry.pending.size());
        if (n > 0) {
            entry.pending.erase(0, static_cast<std::size_t>(n));
        } else if (n < 0 && errno == EAGAIN) {
            const int ev = entry.connection->wait(POLLOUT, transport::ms_until(until));
            if (ev == 0) return ETIMEDOUT;
            if (ev < 0 && errno != EINTR) return errno;
        } else {
            return n < 0 ? errno : EPIPE;
        }
    }
    return 0;
}

// The TCP session goes on under the number: the kept bytes go, the entry
// with them.
FirstWriteState go_plain(int fd, SocketEntry& entry) noexcept {
    if (const int e = hand_over_tcp(fd, entry, transport::SetupClock::now() + kHandOverTimeout); e != 0)
        return broke(entry, e);
    entry.state = SocketState::Plain;
    SocketTable::instance().remove(fd);
    return FirstWriteState::Plain;
}

FirstWriteState finish(int fd, SocketEntry& entry) noexcept {
    transport::UpgradeResult result = entry.upgrade->take_result();
    entry.upgrade.reset();
    const Deadline until = transport::SetupClock::now() + kHandOverTimeout;
    switch (result.outcome) {
        case UpgradeOutcome::Rdma: {
            const bool blocking = !nonblocking(fd);
            int e = 0;
            try {
                e = take_over(fd, entry, std::move(result.connection));
            } catch (...) {
                e = ENOMEM;
            }
            if (e != 0) {
                // Nothing was said on the connection that is gone: the
                // server, waiting for the first bytes, follows to TCP.
                const std::string why = std::string("could not move the session onto RDMA: ") + std::strerror(e);
                if (entry.mode == transport::Mode::Require) return fail(entry, why);
                say_fallback(entry, why);
                return go_plain(fd, entry);
            }
            entry.blocking = blocking;
            if (const int h = hand_over_rdma(entry, until); h != 0) return broke(entry, h);
            return FirstWriteState::Session;
        }
        case UpgradeOutcome::TcpSame:
            say_fallback(entry, result.error.message);
            return go_plain(fd, entry);
        case UpgradeOutcome::TcpReconnect: {
            say_fallback(entry, result.error.message);
            const bool blocking = !nonblocking(fd);
            int e = 0;
            try {
                e = reconnect(fd, entry);
            } catch (...) {
                e = ENOMEM;
            }
            if (e != 0) return broke(entry, e);
            if (!wait_fd(fd, POLLOUT, until)) return broke(entry, ETIMEDOUT);
            if (const int state = tcp_connect_state(fd); state != 0) return broke(entry, state);
            // reconnect() made it non-blocking; the program's was not.
            if (blocking) (void)libc().fcntl(fd, F_SETFL, libc().fcntl(fd, F_GETFL) & ~O_NONBLOCK);
            return go_plain(fd, entry);
        }
        case UpgradeOutcome::Failed:
            if (entry.mode == transport::Mode::Require) return fail(entry, result.error.message);
            return broke(entry, result.error.code);
    }
    return broke(entry, EPROTO);
}

// Whether `fd` still names `entry`: a program may close the number while
// its upgrade waits (another thread), and a new file may take the number.
bool still_ours(int fd, const SocketEntry& entry) noexcept {
    return SocketTable::instance().find(fd).get() == &entry;
}

void forget_registrations(int fd) noexcept {
    if (!EpollRegistry::instance().empty()) EpollRegistry::instance().forget_descriptor(fd);
}

}  // namespace

FirstWriteState advance_first_write(int fd, SocketEntry& entry, bool blocking) noexcept {
    std::unique_lock lock(entry.first_write_lock, std::defer_lock);
    if (blocking) lock.lock();
    else if (!lock.try_lock()) return FirstWriteState::Upgrading;  // another thread steps it
    if (entry.state == SocketState::Rdma) return FirstWriteState::Session;
    if (entry.state == SocketState::Failed) return FirstWriteState::Failed;
    if (entry.state != SocketState::Upgrading || !entry.upgrade) return FirstWriteState::Plain;
    TransportCall inside;
    for (;;) {
        // The step talks on the number: never once it names another file.
        if (!still_ours(fd, entry)) return broke(entry, EBADF);
        if (entry.upgrade->step() == StepStatus::Done) {
            if (!still_ours(fd, entry)) return broke(entry, EBADF);
            return finish(fd, entry);
        }
        if (!blocking) return FirstWriteState::Upgrading;
        const transport::Want want = entry.upgrade->want();
        pollfd fds[transport::Want::kMaxFds];
        for (nfds_t i = 0; i < want.count; ++i) fds[i] = want.fds[i];
        // A signal is no reason to stop: the step after the deadline ends it.
        if (libc().poll(fds, want.count, transport::ms_until(entry.upgrade->deadline())) < 0 && errno != EINTR)
            return broke(entry, errno);
    }
}

void first_read(int fd) noexcept {
    if (take_candidate(fd)) forget_registrations(fd);
}

std::optional<ssize_t> first_write(int fd, const iovec* iov, int iovcnt, int flags) noexcept {
    if (!take_candidate(fd)) return std::nullopt;
    try {
        if (iov == nullptr || iovcnt <= 0) {
            forget_registrations(fd);
            return std::nullopt;
        }
        // PQcancel writes its CancelRequest from a signal handler: judged
        // from a copy on the stack, nothing allocated, unless it may be a
        // ClientHello (never sent from a handler), whose ALPN list is
        // looked for further in. A StartupMessage longer than the copy is
        // judged by its header.
        std::size_t total = 0;
        std::array<std::uint8_t, kStackClassifyBytes> start{};
        std::size_t have = 0;
        for (int i = 0; i < iovcnt; ++i) {
            const auto* base = static_cast<const std::uint8_t*>(iov[i].iov_base);
            if (base == nullptr && iov[i].iov_len > 0) {  // libc's EFAULT is the answer
                forget_registrations(fd);
                return std::nullopt;
            }
            const std::size_t take = std::min(iov[i].iov_len, start.size() - have);
            if (take > 0) std::memcpy(start.data() + have, base, take);
            have += take;
            total += iov[i].iov_len;
        }
        protocol::Opener opener = protocol::classify_opener(std::span(start.data(), have));
        if (have >= kHeaderBytes && start[0] == protocol::kTlsHandshakeRecord) {
            std::vector<std::uint8_t> hello;
            for (int i = 0; i < iovcnt && hello.size() < kClassifyBytes; ++i) {
                const auto* base = static_cast<const std::uint8_t*>(iov[i].iov_base);
                const std::size_t take = std::min(iov[i].iov_len, kClassifyBytes - hello.size());
                hello.insert(hello.end(), base, base + take);
            }
            opener = protocol::classify_opener(hello);
        }
        if (opener == protocol::Opener::None) {
            forget_registrations(fd);
            return std::nullopt;
        }
        int type = 0;
        socklen_t type_len = sizeof type;
        if (libc().getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_len) < 0 || type != SOCK_STREAM) {
            forget_registrations(fd);
            return std::nullopt;
        }
        sockaddr_storage peer{};
        socklen_t peer_len = sizeof peer;
        if (libc().getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) < 0) {
            // Not connected yet: the write fails in libc, the next one is judged.
            if (errno == ENOTCONN) mark_candidate(fd);
            return std::nullopt;
        }
        const conninfo::RsocketPolicy policy = driver_policy_for(reinterpret_cast<const sockaddr*>(&peer), peer_len);
        if (policy == conninfo::RsocketPolicy::Off) {
            forget_registrations(fd);
            return std::nullopt;
        }
        if (const int state = tcp_connect_state(fd); state != 0) {
            if (state == EINPROGRESS) mark_candidate(fd);
            return std::nullopt;
        }
        const std::size_t accepted = std::min(total, kMaxPendingBytes);
        auto entry = std::make_unique<SocketEntry>();
        entry->mode = policy == conninfo::RsocketPolicy::Require ? transport::Mode::Require : transport::Mode::Prefer;
        entry->peer = peer;
        entry->peer_len = peer_len;
        entry->armed = transport::SetupClock::now();
        entry->by_first_write = true;
        entry->pending.reserve(accepted);
        for (int i = 0; i < iovcnt && entry->pending.size() < accepted; ++i) {
            const std::size_t take = std::min(iov[i].iov_len, accepted - entry->pending.size());
            if (take > 0) entry->pending.append(static_cast<const char*>(iov[i].iov_base), take);
        }
        {
            TransportCall inside;
            entry->upgrade = std::make_unique<transport::ClientUpgrade>(fd, entry->mode, transport::Settings{},
                                                                        transport::TcpIo{libc().send, libc().recv});
        }
        entry->state = SocketState::Upgrading;
        if (!SocketTable::instance().install(fd, std::move(entry))) {
            forget_registrations(fd);
            if (policy != conninfo::RsocketPolicy::Require) return std::nullopt;
            // require must not go quietly without it.
            write_stderr("WARNING:  with_rsocket=require: RDMA is not possible: this connection's descriptor cannot be "
                         "looked after; the connection fails\n");
            errno = ECONNREFUSED;
            return -1;
        }
        EntryRef e = SocketTable::instance().find(fd);
        if (e == nullptr) return std::nullopt;  // closed meanwhile by another thread
        // Its waits must answer from the upgrade, which their reads drive.
        adopt_epoll_registrations(fd);
        const bool blocking = (flags & MSG_DONTWAIT) == 0 && !nonblocking(fd);
        if (advance_first_write(fd, *e, blocking) == FirstWriteState::Failed) {
            errno = e->failed_errno;
            return -1;
        }
        return static_cast<ssize_t>(accepted);
    } catch (...) {
        return std::nullopt;  // out of memory: the connection stays plain TCP
    }
}

}  // namespace pg_rdma::client
