// Failover for Stream (see stream.hpp): when the queue pair fails mid-
// session (the link down past the retry limit, the device removed, the peer
// reporting the same), both ends move the byte stream onto the TCP
// connection they kept open since the upgrade, with no byte lost or
// repeated, and carry on there.
//
// The exchange (protocol/failover.hpp): each end puts its queue pair into
// the error state, takes in the completions already there (data that
// landed in its RX ring, sends the peer's device acknowledged), and sends
// on TCP how many bytes of the peer's stream it holds. Each then resends its
// own stream from the peer's count: those bytes are still in its staging
// buffer, which only a send completion frees, and a send completes only
// once the peer's device acknowledged it. A count below what is still
// held (a completion the peer never saw) or a peer that cannot resume ends
// the session with an error instead: never a wrong byte.
//
// After it: bytes left in the RX ring are read first, then TCP. fd() keeps
// its number (the client library put it under the program's socket
// number): the completion and rdma_cm channels leave its epoll set and the
// TCP socket joins it, watched for what the caller waits for.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <string>
#include <utility>

#include "transport/stream.hpp"

namespace pg_rdma::transport {
namespace {

// After the queue pair is in the error state nothing new lands; a
// completion queue quiet this long has given up what it held.
constexpr Millis kSalvageQuiet{20};
constexpr Millis kSalvageLimit{500};  // ... and never longer than this in all
constexpr Millis kSalvagePause{1};    // between looks at an empty queue
// How often a caller waiting for the peer's failover message wakes to
// check its deadline.
constexpr Millis kFailoverTick{200};
constexpr int kSalvageBatch = 16;  // completions per ibv_poll_cq

constexpr int kTcpFlags = MSG_DONTWAIT | MSG_NOSIGNAL;

bool would_block(int e) { return e == EAGAIN || e == EWOULDBLOCK; }

void pause_for(Millis m) {
    timespec ts{0, static_cast<long>(std::chrono::nanoseconds(m).count())};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

}  // namespace

bool Stream::attach_tcp(int fd) {
    if (failover_ != Failover::None) return errno = EBUSY, false;
    if (tcp_fd_ >= 0 && tcp_watched_ != 0) (void)events_.watch_tcp(tcp_fd_, tcp_watched_, 0);
    tcp_watched_ = 0;
    tcp_copy_ = FileDescriptor();
    tcp_fd_ = -1;
    if (fd < 0 || (stats_.features & protocol::feature::kTcpFailover) == 0) return true;
    // A number of our own: the program may close or reuse its number (the
    // client library moves the socket; a forked child's parent closes its
    // copy), and failover must never write into whatever gets it next.
    // Made by the system call itself: in a client whose fcntl() the client
    // library wraps, a copy made through the wrapper would be counted as
    // another number of the program's session, and that session would then
    // outlive the program's last close (with this copy, its descriptors
    // and its pinned memory).
    tcp_copy_ = FileDescriptor(static_cast<int>(::syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 0)));
    if (!tcp_copy_.valid()) return false;
    tcp_fd_ = tcp_copy_.get();
    // On RDMA the socket is silent until the peer's failover message or its
    // end: watching it costs nothing.
    const std::uint32_t want = EPOLLIN | EPOLLRDHUP;
    if (!events_.watch_tcp(tcp_fd_, 0, want)) return false;
    tcp_watched_ = want;
    return true;
}

Millis Stream::failover_wait() const {
    return keepalive_agreed() ? Millis{stats_.keepalive_timeout_ms} : settings_.keepalive_timeout;
}

bool Stream::failover_eligible(int code) const {
    // A peer that broke the protocol is not one to resume with.
    return code != EPROTO && tcp_fd_ >= 0 && !tcp_gone_ && phase_ == Phase::Established &&
           (stats_.features & protocol::feature::kTcpFailover) != 0;
}

void Stream::on_tcp_event() {
    if (tcp_fd_ < 0 || failover_ != Failover::None) return;
    std::array<std::uint8_t, protocol::kFailoverMessageSize> head{};
    const ssize_t n = ::recv(tcp_fd_, head.data(), head.size(), MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) {
        if (protocol::decode_failover({head.data(), static_cast<std::size_t>(n)}).status ==
            protocol::DecodeStatus::Error) {
            // Not ours (a client that wrote on TCP after all): the session
            // is the program's to judge; stop watching a socket that would
            // stay readable.
            tcp_gone_ = true;
            (void)events_.watch_tcp(tcp_fd_, tcp_watched_, 0);
            tcp_watched_ = 0;
            return;
        }
        // The peer's failover message: its queue pair failed. Ours follows,
        // resumable or not (an end that cannot resume says so at once).
        if (error_ == 0) {
            failure_reason_ = "the peer's RDMA connection failed (it said so on TCP)";
            error_ = ECONNRESET;
        } else if (!failover_wanted_) {
            failover_refused_ = true;  // our own failure is one TCP cannot mend
        }
        failover_wanted_ = true;
        link_->disconnect();
        return;
    }
    if (n < 0 && (would_block(errno) || errno == EINTR)) return;
    // The peer closed its socket (after its Close, a normal end) or the
    // connection broke: nothing can move onto it, and a socket at EOF would
    // keep fd() readable.
    tcp_gone_ = true;
    (void)events_.watch_tcp(tcp_fd_, tcp_watched_, 0);
    tcp_watched_ = 0;
}

bool Stream::salvage_completion(const ibv_wc& wc) {
    if (wc.status != IBV_WC_SUCCESS) return true;  // flushed or failed: it never happened
    if ((wc.wr_id & kRecvWrFlag) == 0) {
        staging_.release_to(sq_.on_completed(wc.wr_id));  // the peer's device has these bytes
        return true;
    }
    if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM)
        return phase_ == Phase::Established && !peer_bytes_sent_ && rx_.on_write(ntohl(wc.imm_data), ring_wraps_);
    if (wc.opcode == IBV_WC_RECV && wc.byte_len == protocol::kControlMessageSize) {
        const auto slot = static_cast<std::uint32_t>(wc.wr_id & ~kRecvWrFlag);
        const auto decoded = protocol::decode_control({link_->control_rx_slot(slot), wc.byte_len});
        if (!decoded.is_ok()) return false;
        if (const auto* close = std::get_if<protocol::CloseMessage>(&decoded.value)) {
            // The peer was closing: it does not resume (begin_failover).
            if (close->bytes_sent != rx_.produced()) return false;
            peer_bytes_sent_ = close->bytes_sent;
        }
    }
    return true;
}

bool Stream::salvage_completions() {
    std::array<ibv_wc, kSalvageBatch> wcs;
    bool intact = true;
    const auto start = Clock::now();
    auto last_seen = start;
    for (;;) {
        const int n = link_->poll(wcs);
        if (n < 0) return false;
        for (int i = 0; i < n; ++i)
            if (!salvage_completion(wcs[static_cast<std::size_t>(i)])) intact = false;
        const auto now = Clock::now();
        if (n > 0) {
            last_seen = now;
            continue;
        }
        if (now - last_seen >= kSalvageQuiet || now - start >= kSalvageLimit) break;
        pause_for(kSalvagePause);
    }
    return intact;
}

void Stream::begin_failover() {
    failover_wanted_ = false;
    failover_reason_ = failure_reason_.empty() ? std::string(std::strerror(error_)) : failure_reason_;
    link_->disconnect();  // the error state: what is in flight stops here
    const bool salvaged = salvage_completions() && !salvage_broken_;
    // The completion and rdma_cm channels say nothing useful any more, and
    // an event left in one would keep fd() readable.
    events_.forget_rdma_sources(link_->completion_fd(), link_->event_fd());
    completion_event_pending_ = false;
    keep_and_release_device();
    failover_ = Failover::Exchanging;
    const char* unresumable = !salvaged                    ? "bytes in flight could not be accounted for"
                              : failover_refused_         ? "this end had failed in a way TCP cannot mend"
                              : closing_ || close_queued_ ? "this end was closing"
                              : peer_bytes_sent_          ? "the peer was closing"
                                                          : nullptr;
    own_failover_ = {unresumable == nullptr, rx_.produced(), kept_from_, kept_from_ + kept_.size()};
    const auto message = protocol::encode_failover(own_failover_);
    const ssize_t sent = ::send(tcp_fd_, message.data(), message.size(), kTcpFlags);
    if (sent != static_cast<ssize_t>(message.size())) {
        failover_failed(sent < 0 ? errno : EIO, std::string("could not send on TCP: ") +
                                                    std::strerror(sent < 0 ? errno : EIO));
        return;
    }
    if (unresumable != nullptr) {
        failover_failed(ECONNRESET, unresumable);
        return;
    }
    // The peer answers once its process runs; a link that is down for a
    // while delays the answer as it delays TCP. A peer whose host does not
    // even acknowledge our message for as long as the keepalive allows is
    // gone (read_peer_failover).
    failover_deadline_ = Clock::now() + failover_wait();
    (void)events_.set_tick(kFailoverTick);
    tcp_progress();
}

void Stream::keep_and_release_device() {
    // What the failover still needs, copied out of pinned memory: the bytes
    // that arrived and were not read, and our stream from the first byte no
    // completion released (the peer may lack any of them).
    leftover_.resize(static_cast<std::size_t>(rx_.unread()));
    leftover_pos_ = 0;
    (void)take_from_ring(leftover_.data(), leftover_.size());
    kept_from_ = staging_.head() - staging_.in_use();
    kept_.resize(static_cast<std::size_t>(staging_.in_use()));
    const std::uint32_t size = staging_.size();
    for (std::size_t done = 0; done < kept_.size();) {
        const auto offset = static_cast<std::uint32_t>((kept_from_ + done) % size);
        const std::size_t piece = std::min<std::size_t>(kept_.size() - done, size - offset);
        std::memcpy(kept_.data() + done, link_->staging() + offset, piece);
        done += piece;
    }
    // Then the device goes: `rdma link delete` (a device removed) waits
    // until every user has let go of it, and the session lives on over TCP.
    device_name_ = link_->device_name();
    link_.reset();
}

void Stream::failover_failed(int code, std::string why) {
    failover_ = Failover::Failed;
    tcp_error_ = code != 0 ? code : EIO;
    failure_reason_ = "RDMA failed (" + failover_reason_ + ") and the session could not move onto TCP: " + why;
    (void)events_.set_tick(Millis{0});
    (void)events_.take_tick();
    update_tcp_registration();
}

void Stream::tcp_progress() {
    if (failover_ == Failover::Exchanging) {
        (void)events_.take_tick();
        read_peer_failover();
    }
    if (failover_ == Failover::Tcp) push_resend();
    update_tcp_registration();
}

void Stream::read_peer_failover() {
    while (peer_failover_have_ < peer_failover_.size()) {
        const ssize_t n = ::recv(tcp_fd_, peer_failover_.data() + peer_failover_have_,
                                 peer_failover_.size() - peer_failover_have_, MSG_DONTWAIT);
        if (n > 0) {
            peer_failover_have_ += static_cast<std::size_t>(n);
            continue;
        }
        if (n == 0) return failover_failed(ECONNRESET, "the peer closed its TCP connection instead of resuming");
        if (errno == EINTR) continue;
        if (!would_block(errno))
            return failover_failed(errno, std::string("the TCP connection failed too: ") + std::strerror(errno));
        if (Clock::now() >= failover_deadline_) {
            // The peer's host has our message (its TCP acknowledged every
            // byte): its process is alive but busy, a backend in a long
            // query, say. Wait on as a TCP session would.
            int unacknowledged = 0;
            if (::ioctl(tcp_fd_, SIOCOUTQ, &unacknowledged) == 0 && unacknowledged == 0) {
                failover_deadline_ = Clock::now() + failover_wait();
                return;
            }
            return failover_failed(ETIMEDOUT, "the peer's host did not acknowledge it on TCP within the keepalive timeout");
        }
        return;
    }
    const auto decoded = protocol::decode_failover(peer_failover_);
    if (!decoded.is_ok()) return failover_failed(EPROTO, std::string(decoded.error));
    const protocol::FailoverMessage& peer = decoded.value;
    if (!peer.resumable) return failover_failed(ECONNRESET, "the peer could not resume");
    // Judged from both messages, so the peer reaches the same verdict: each
    // end must still hold the other's missing part of its stream.
    if (!protocol::resumable_pair(own_failover_, peer))
        return failover_failed(ECONNRESET, "an end lacks bytes the other no longer holds");
    stats_.bytes_sent += held_;  // the hold goes with the resend
    held_ = 0;
    resend_from_ = peer.received;
    resend_to_ = kept_from_ + kept_.size();
    failover_ = Failover::Tcp;
    stats_.failed_over = true;
    (void)events_.set_tick(Millis{0});
    (void)events_.take_tick();
}

void Stream::push_resend() {
    while (resend_from_ < resend_to_ && tcp_error_ == 0) {
        const auto at = static_cast<std::size_t>(resend_from_ - kept_from_);
        const ssize_t n = ::send(tcp_fd_, kept_.data() + at, kept_.size() - at, kTcpFlags);
        if (n > 0) {
            resend_from_ += static_cast<std::uint64_t>(n);
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && would_block(errno)) {
            return;
        } else {
            tcp_error_ = n < 0 ? errno : EPIPE;
        }
    }
    if (resend_from_ == resend_to_ && !kept_.empty()) kept_ = {};  // all out: the copy goes
    if (tcp_shutdown_pending_ && resend_from_ == resend_to_) {
        tcp_shutdown_pending_ = false;
        (void)::shutdown(tcp_fd_, SHUT_WR);
    }
}

void Stream::update_tcp_registration() {
    std::uint32_t want = 0;
    bool ready = false;
    switch (failover_) {
        case Failover::None: return;  // the RDMA path keeps fd() (update_readiness)
        case Failover::Exchanging: {
            want = EPOLLIN | EPOLLRDHUP;  // the peer's message; the tick ends the wait
            const short in = sleeping_for_ ? *sleeping_for_ : interest_ ? *interest_ : POLLIN;
            ready = leftover_bytes() > 0 && (in & (POLLIN | POLLRDHUP)) != 0;
            break;
        }
        case Failover::Tcp: {
            const short in = sleeping_for_ ? *sleeping_for_ : interest_ ? *interest_ : POLLIN;
            if ((in & (POLLIN | POLLRDHUP)) != 0) {
                if (leftover_bytes() > 0) ready = true;
                else want |= EPOLLIN | EPOLLRDHUP;
            }
            // Resending needs no caller: wake whoever sleeps once it can go on.
            if ((in & POLLOUT) != 0 || resend_from_ < resend_to_ || tcp_shutdown_pending_) want |= EPOLLOUT;
            if (tcp_error_ != 0) ready = true;
            break;
        }
        case Failover::Failed: ready = true; break;
    }
    if (events_.watch_tcp(tcp_fd_, tcp_watched_, want)) tcp_watched_ = want;
    else ready = true;  // the caller finds out what is wrong
    events_.set_ready(ready);
}

short Stream::tcp_readiness(short wanted) {
    short r = 0;
    if (leftover_bytes() > 0) r |= POLLIN;
    if (failover_ == Failover::Failed || tcp_error_ != 0) {
        r |= POLLIN | POLLOUT | POLLERR | POLLHUP;
    } else if (failover_ == Failover::Tcp) {
        pollfd p{tcp_fd_, POLLIN | POLLOUT | POLLRDHUP, 0};
        if (::poll(&p, 1, 0) > 0) {
            if ((p.revents & POLLIN) != 0) r |= POLLIN;
            if ((p.revents & POLLOUT) != 0 && resend_from_ == resend_to_) r |= POLLOUT;
            r |= static_cast<short>(p.revents & (POLLRDHUP | POLLHUP | POLLERR));
        }
        if (close_queued_) r |= POLLOUT;  // a write fails at once (EPIPE)
    }
    return static_cast<short>(r & (wanted | POLLERR | POLLHUP));
}

std::size_t Stream::copy_leftovers(std::uint8_t* out, std::size_t len) {
    const std::size_t copied = std::min(len, leftover_bytes());
    std::memcpy(out, leftover_.data() + leftover_pos_, copied);
    leftover_pos_ += copied;
    stats_.bytes_received += copied;
    if (leftover_bytes() == 0) {
        leftover_ = {};
        leftover_pos_ = 0;
        update_tcp_registration();  // from here on TCP says when input comes
    }
    return copied;
}

ssize_t Stream::tcp_read(void* buf, std::size_t len) {
    tcp_progress();
    if (leftover_bytes() > 0) return static_cast<ssize_t>(copy_leftovers(static_cast<std::uint8_t*>(buf), len));
    if (failover_ == Failover::Failed) return errno = tcp_error_, -1;
    if (failover_ == Failover::Exchanging) return errno = EAGAIN, -1;
    const ssize_t n = ::recv(tcp_fd_, buf, len, MSG_DONTWAIT);
    if (n > 0) stats_.bytes_received += static_cast<std::uint64_t>(n);
    return n;
}

ssize_t Stream::tcp_writev(const iovec* iov, int iovcnt, bool more) {
    tcp_progress();
    if (failover_ == Failover::Failed) return errno = tcp_error_, -1;
    if (tcp_error_ != 0) return errno = tcp_error_, -1;
    if (close_queued_) return errno = EPIPE, -1;
    // Our new bytes follow the ones the peer lacks.
    if (failover_ == Failover::Exchanging || resend_from_ < resend_to_) {
        ++stats_.write_blocked;
        update_tcp_registration();
        return errno = EAGAIN, -1;
    }
    msghdr m{};
    m.msg_iov = const_cast<iovec*>(iov);
    m.msg_iovlen = static_cast<std::size_t>(iovcnt);
    // MSG_MORE is not passed on: TCP would cork the bytes with no flush()
    // to end it (a zero-length send pushes nothing), and PostgreSQL's own
    // TCP path never sets it.
    (void)more;
    const ssize_t n = ::sendmsg(tcp_fd_, &m, kTcpFlags);
    if (n > 0) stats_.bytes_sent += static_cast<std::uint64_t>(n);
    return n;
}

short Stream::tcp_poll_events(short wanted) {
    tcp_progress();
    return tcp_readiness(wanted);
}

int Stream::tcp_wait(short wanted, Millis timeout) {
    const bool timed = timeout.count() >= 0;
    const auto deadline = timed ? Clock::now() + timeout : Clock::time_point::max();
    for (;;) {
        if (const short r = tcp_poll_events(wanted); r != 0) return r;
        auto until = deadline;
        if (failover_ == Failover::Exchanging) until = std::min(until, failover_deadline_ + kSalvagePause);
        int ms = -1;
        if (until != Clock::time_point::max()) {
            const auto now = Clock::now();
            if (timed && now >= deadline) return 0;
            ms = static_cast<int>(std::max<Millis::rep>(0, std::chrono::ceil<Millis>(until - now).count()));
        }
        pollfd p{tcp_fd_, 0, 0};
        if (failover_ == Failover::Exchanging) {
            p.events = POLLIN;
        } else {
            if ((wanted & (POLLIN | POLLRDHUP)) != 0) p.events |= POLLIN | POLLRDHUP;
            if ((wanted & POLLOUT) != 0 || resend_from_ < resend_to_) p.events |= POLLOUT;
        }
        if (::poll(&p, 1, ms) < 0 && errno == EINTR) return -1;
    }
}

bool Stream::tcp_drain_done() {
    tcp_progress();
    if (failover_ == Failover::Failed || tcp_error_ != 0) return true;
    return failover_ == Failover::Tcp && resend_from_ == resend_to_ && !tcp_shutdown_pending_;
}

}  // namespace pg_rdma::transport
