#include "libclient/preload/upgrade_driver.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>

#include "libclient/conninfo/connect_timeout.hpp"
#include "libclient/preload/epoll_registry.hpp"
#include "libclient/preload/libc_calls.hpp"
#include "libclient/preload/libpq_calls.hpp"
#include "libclient/preload/pq_messages.hpp"
#include "libclient/preload/session_moves.hpp"

namespace pg_rdma::client {
namespace {

using transport::StepStatus;
using transport::UpgradeOutcome;

// libpq's connect_timeout, in whole seconds; nullopt when it has none.
std::optional<long> libpq_connect_timeout(PGconn* conn) {
    std::optional<long> seconds;
    PQconninfoOption* options = libpq().PQconninfo(conn);
    if (options == nullptr) return seconds;
    for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o)
        if (std::strcmp(o->keyword, "connect_timeout") == 0) seconds = conninfo::connect_timeout_seconds(o->val);
    libpq().PQconninfoFree(options);
    return seconds;
}

// libpq 15 counts connect_timeout in whole seconds of time(): its deadline
// can come up to a second before N seconds on our clock have passed.
constexpr transport::Millis kLibpqRounding{1000};

// The upgrade of one attempt, started when its TCP connect completed.
// Waiting for the server's reply is the server starting its backend, which
// the same session on TCP would wait for too. Without libpq's
// connect_timeout nothing bounds it, as nothing bounds TCP's wait. With
// connect_timeout N, the mode decides: require has nothing to fall back
// to, so the upgrade gets N (less libpq's rounding) and libpq's own timeout
// ends it; true gets half of N for the reply and the RDMA setup together,
// so that a fallback (a fresh TCP connection when the reply is late, the
// same one otherwise) leaves libpq the other half for the session on TCP.
// The RDMA setup never gets more than the transport's default or the
// server's budget (the reply says).
std::unique_ptr<transport::ClientUpgrade> start_upgrade(PGconn* conn, int fd, const SocketEntry& entry) {
    transport::Settings settings;
    transport::ClientUpgrade::Limits limits{transport::Deadline::max()};
    if (const auto seconds = libpq_connect_timeout(conn)) {
        const auto whole = std::chrono::duration_cast<transport::Millis>(std::chrono::seconds{*seconds});
        const bool require = entry.mode == transport::Mode::Require;
        const transport::Millis budget = require ? std::max(whole - kLibpqRounding, kLibpqRounding) : whole / 2;
        settings.connect_timeout = std::min(settings.connect_timeout, budget);
        limits.rdma_latest = entry.armed + budget;
        if (!require) limits.reply = limits.rdma_latest;
    }
    return std::make_unique<transport::ClientUpgrade>(fd, entry.mode, settings,
                                                      transport::TcpIo{libc().send, libc().recv}, limits);
}

PostgresPollingStatusType waiting_for(const transport::Want& want) {
    return (want.count > 0 && (want.fds[0].events & POLLOUT) != 0) ? PGRES_POLLING_WRITING
                                                                  : PGRES_POLLING_READING;
}

void fail_attempt(SocketEntry& entry, int code, std::string_view reason, std::string& failure) {
    entry.state = SocketState::Failed;
    // Not ECONNREFUSED: libpq would add "Is the server running...?".
    entry.failed_errno = code != 0 && code != ECONNREFUSED ? code : EPROTONOSUPPORT;
    // With prefer only a broken TCP connection fails the attempt.
    failure = entry.mode == transport::Mode::Require ? "with_rsocket=require: RDMA is not possible: "
                                                     : "with_rsocket=true: the connection broke during the RDMA upgrade: ";
    failure += reason;
    failure += '\n';
}

std::optional<PostgresPollingStatusType> finish_upgrade(PGconn* conn, int fd, SocketEntry& entry,
                                                        std::string& failure) {
    transport::UpgradeResult result = entry.upgrade->take_result();
    entry.upgrade.reset();
    switch (result.outcome) {
        case UpgradeOutcome::Rdma:
            if (const int e = take_over(fd, entry, std::move(result.connection)); e != 0) {
                // Out of descriptors, say. The connection is gone with the
                // failed take-over, and nothing has been said on it: the
                // server, waiting for our first bytes, follows us to TCP.
                const std::string why = std::string("could not move the session onto RDMA: ") + std::strerror(e);
                if (entry.mode == transport::Mode::Require) {
                    fail_attempt(entry, e, why, failure);
                } else {
                    warn_fallback(conn, why);
                    SocketTable::instance().remove(fd);
                }
            }
            return std::nullopt;
        case UpgradeOutcome::TcpSame:
            warn_fallback(conn, result.error.message);
            SocketTable::instance().remove(fd);
            return std::nullopt;
        case UpgradeOutcome::TcpReconnect:
            warn_fallback(conn, result.error.message);
            if (const int e = reconnect(fd, entry); e != 0) {
                entry.state = SocketState::Failed;
                entry.failed_errno = e;
                return std::nullopt;
            }
            entry.state = SocketState::Reconnecting;
            return PGRES_POLLING_WRITING;
        case UpgradeOutcome::Failed:
            fail_attempt(entry, result.error.code, result.error.message, failure);
            return std::nullopt;
    }
    return std::nullopt;
}

}  // namespace

std::string abandoned_by_libpq(const SocketEntry& entry) {
    if (entry.state != SocketState::Upgrading || !entry.upgrade) return {};
    const auto stage = entry.upgrade->stage();
    std::string line = entry.mode == transport::Mode::Require ? "with_rsocket=require: RDMA is not possible: "
                                                              : "with_rsocket=true: ";
    line += "libpq's connect_timeout ran out while ";
    line += transport::to_string(stage);
    if (stage == transport::ClientUpgrade::Stage::AwaitingReply)
        line += " (the server's backend did not answer: an overloaded server?)";
    else if (stage == transport::ClientUpgrade::Stage::Connecting)
        line += " (if the server's RDMA port never answers, check that RoCE v2, UDP port 4791, is not blocked)";
    line += '\n';
    return line;
}

bool arm(int fd, const sockaddr* addr, socklen_t len, conninfo::RsocketPolicy policy) {
    if (addr == nullptr || len > sizeof(sockaddr_storage)) return false;
    auto entry = std::make_unique<SocketEntry>();
    entry->mode = policy == conninfo::RsocketPolicy::Require ? transport::Mode::Require : transport::Mode::Prefer;
    std::memcpy(&entry->peer, addr, len);
    entry->peer_len = len;
    entry->armed = transport::SetupClock::now();
    return SocketTable::instance().install(fd, std::move(entry));
}

std::optional<PostgresPollingStatusType> drive(PGconn* conn, int fd, SocketEntry& entry, std::string& failure) {
    TransportCall inside;
    switch (entry.state) {
        case SocketState::Connecting: {
            const int state = tcp_connect_state(fd);
            if (state == EINPROGRESS) return PGRES_POLLING_WRITING;
            if (state != 0) {
                // Reading SO_ERROR cleared it: libpq learns it from the entry,
                // reports the failed connect and tries the next address.
                entry.state = SocketState::Failed;
                entry.failed_errno = state;
                return std::nullopt;
            }
            entry.upgrade = start_upgrade(conn, fd, entry);
            entry.state = SocketState::Upgrading;
            [[fallthrough]];
        }
        case SocketState::Upgrading:
            if (entry.upgrade->step() == StepStatus::InProgress) return waiting_for(entry.upgrade->want());
            return finish_upgrade(conn, fd, entry, failure);
        case SocketState::Reconnecting: {
            const int state = tcp_connect_state(fd);
            if (state == EINPROGRESS) return PGRES_POLLING_WRITING;
            if (state != 0) {  // as above: libpq reads the error from the entry
                entry.state = SocketState::Failed;
                entry.failed_errno = state;
                return std::nullopt;
            }
            // Connected: plain libpq from here on.
            SocketTable::instance().remove(fd);
            return std::nullopt;
        }
        case SocketState::Rdma:
        case SocketState::Failed:
        case SocketState::Plain: return std::nullopt;
    }
    return std::nullopt;
}

}  // namespace pg_rdma::client
