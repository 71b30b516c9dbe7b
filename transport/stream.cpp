// Socket-like calls of Stream (see connection.hpp for the contract).
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "transport/stream.hpp"

namespace pg_rdma::transport {

Stream::Stream(std::unique_ptr<Link> link)
    : link_(std::move(link)),
      settings_(link_->settings()),
      rx_(settings_.rx_buffer_size),
      staging_(settings_.tx_buffer_size),
      staging_wraps_(link_->staging_may_wrap()),
      sq_(settings_.send_queue_depth),
      recv_credits_(settings_.credits),
      keepalive_(settings_.keepalive_interval, settings_.keepalive_timeout, Clock::now()),
      spin_(settings_.busy_poll, settings_.busy_poll_max) {
    stats_.rx_buffer_size = settings_.rx_buffer_size;
}

Stream::~Stream() = default;

ssize_t Stream::read(void* buf, std::size_t len) {
    if (closed_) return errno = EBADF, -1;
    if (len == 0) return 0;
    if (over_tcp()) return tcp_read(buf, len);
    end_hold();
    // Input that the caller's wait has just caught is read without polling
    // again: that poll would find nothing, on the path of every reply.
    // Otherwise poll, cheaply (no system call): it keeps receives posted
    // and grants flowing while a reader works through a backlog.
    if (!std::exchange(input_caught_, false) || rx_.unread() == 0) poll_completions();
    // Nothing here: say EAGAIN at once; waiting, and spinning before it, is
    // wait()'s job. The first EAGAIN after data (a read right after a write,
    // in a request/response exchange) makes no system call and does not arm
    // the CQ: the caller's wait (wait(), spin(), poll_events()) spins first
    // and arms only if it goes to sleep. A second EAGAIN in a row means the
    // caller slept on fd() and woke for an internal event (or for the
    // disarmed CQ's signal), so consume the events and arm, or its next
    // poll() would wake again.
    const bool again = rx_.unread() == 0 && !eof() && ++empty_reads_ >= 2;
    if (again) progress();
    if (rx_.unread() == 0) {
        if (eof()) return 0;
        if (error_ != 0 && over_tcp()) return tcp_read(buf, len);
        update_readiness(again ? Arm::kIfIdle : Arm::kNever);  // a sleep point
        errno = error_ != 0 ? error_ : EAGAIN;
        return -1;
    }
    empty_reads_ = 0;
    const std::size_t copied = take_from_ring(static_cast<std::uint8_t*>(buf), len);
    stats_.bytes_received += copied;
    if (rx_.announce_due()) credit_update_pending_ = true;
    flush_control();
    // fd()'s readiness is brought up to date where a caller may go to sleep
    // (EAGAIN, poll_events, progress), not after every read: in a
    // request/response exchange that would be two eventfd system calls a
    // round trip. Stale-ready is harmless (one spurious wakeup); fd() is
    // never stale-unready: it signals nothing only while the CQ is armed,
    // and the event of an armed CQ keeps it readable until
    // arm_completions() takes it, right before arming again.
    return static_cast<ssize_t>(copied);
}

std::size_t Stream::take_from_ring(std::uint8_t* out, std::size_t len) {
    std::size_t copied = 0;
    // At most two pieces: up to the ring's end, then from its start.
    while (copied < len && rx_.unread() > 0) {
        const auto piece = static_cast<std::uint32_t>(std::min<std::size_t>(len - copied, rx_.contiguous_unread()));
        std::memcpy(out + copied, link_->rx_ring() + rx_.read_offset(), piece);
        rx_.consume(piece);
        copied += piece;
    }
    return copied;
}

ssize_t Stream::writev(const iovec* iov, int iovcnt, bool more) {
    if (closed_) return errno = EBADF, -1;
    std::size_t wanted = 0;
    for (int i = 0; i < iovcnt; ++i) wanted += iov[i].iov_len;
    if (over_tcp()) return wanted == 0 ? 0 : tcp_writev(iov, iovcnt, more);
    if (error_ != 0) return errno = error_, -1;
    if (close_queued_) return errno = EPIPE, -1;
    if (wanted == 0) return 0;  // as send(2): nothing to do is not "would block"
    if (peer_disconnected_) return write_to_departed_peer(wanted);
    write_blocked_ = false;
    if (iovcnt == 1 && !more && post_whole(static_cast<const std::uint8_t*>(iov[0].iov_base), wanted)) {
        // Posted: a failure from here on is the failover's to mend (the
        // bytes are in staging), so they count as written.
        if (error_ != 0 && !failover_wanted_) return errno = error_, -1;
        update_readiness(Arm::kNever);  // never arms, as below
        return static_cast<ssize_t>(wanted);
    }
    std::size_t total = post_iov(iov, iovcnt, more);
    if (total == 0 && error_ == 0) {
        // Blocked: collect completions and credit updates once, then retry.
        progress();
        total = post_iov(iov, iovcnt, more);
    }
    if (total > 0) {
        // Never arms: a caller about to wait for the reply spins first.
        update_readiness(Arm::kNever);
        return static_cast<ssize_t>(total);
    }
    if (error_ != 0) return over_tcp() ? tcp_writev(iov, iovcnt, more) : (errno = error_, -1);
    // Its Close and disconnect came in while this call looked for room.
    if (peer_disconnected_) return write_to_departed_peer(wanted);
    write_blocked_ = true;
    ++stats_.write_blocked;
    update_readiness();
    return errno = EAGAIN, -1;
}

ssize_t Stream::write_to_departed_peer(std::size_t wanted) {
    // As TCP's socket after the peer's FIN: the first write after the peer
    // closed and left is taken, and its bytes are lost (TCP's draw the
    // peer's RST); only a later write fails with EPIPE, as over loopback,
    // where the RST comes back inside the first send (across a network TCP
    // may take more before it). So a program that answers the peer's
    // goodbye with its own (TLS's close_notify, as asyncio's SSL transport
    // sends it) sees no error, whether or not the peer's disconnect came in
    // before that write. close() reports the bytes as lost.
    if (wrote_after_peer_left_) return errno = EPIPE, -1;
    wrote_after_peer_left_ = true;
    return static_cast<ssize_t>(wanted);
}

std::size_t Stream::post_iov(const iovec* iov, int iovcnt, bool more) {
    std::size_t total = 0;
    for (int i = 0; i < iovcnt; ++i) {
        const auto* base = static_cast<const std::uint8_t*>(iov[i].iov_base);
        for (std::size_t done = 0; done < iov[i].iov_len;) {
            const auto want = static_cast<std::uint32_t>(
                std::min<std::size_t>(iov[i].iov_len - done, std::numeric_limits<std::uint32_t>::max()));
            // The pieces of one vector travel together (one WRITE where
            // they fit), as writev(2) makes one TCP segment of them.
            // The last piece of a write without MSG_MORE goes out at once:
            // no look whether the hold could still grow. Not to a peer that
            // left (end_hold's rule): those bytes can only be lost.
            const bool last = !more && !peer_disconnected_ && i + 1 == iovcnt && done + want == iov[i].iov_len;
            const std::uint32_t n = post_data(base + done, want, !last);
            if (n == 0) {
                if (!more) end_hold();
                return total;
            }
            done += n;
            total += n;
        }
    }
    if (!more) end_hold();
    return total;
}

int Stream::shutdown_write() {
    if (closed_) return errno = EBADF, -1;
    if (over_tcp()) {
        if (failover_ == Failover::Failed) return errno = tcp_error_, -1;
        close_queued_ = true;
        // After the bytes the peer still lacks.
        tcp_shutdown_pending_ = true;
        tcp_progress();
        return 0;
    }
    close_queued_ = true;
    flush_control();
    update_readiness();
    return 0;
}

int Stream::close() {
    if (closed_) return 0;
    begin_close();
    if (failover_ != Failover::None) {
        // On TCP: the bytes the peer lacks go out before the caller closes
        // its socket (our own copy closes with the stream).
        const auto deadline = Clock::now() + settings_.close_drain_timeout;
        while (!tcp_drain_done()) {
            const auto left = std::chrono::ceil<Millis>(deadline - Clock::now());
            if (left.count() <= 0) break;
            pollfd p{tcp_fd_, static_cast<short>(failover_ == Failover::Exchanging ? POLLIN : POLLOUT), 0};
            (void)::poll(&p, 1, static_cast<int>(std::min<Millis::rep>(left.count(), INT32_MAX)));
        }
        const bool lost = failover_ != Failover::Tcp || resend_from_ < resend_to_;
        const int code = tcp_error_ != 0 ? tcp_error_ : ETIMEDOUT;
        closed_ = true;
        if (!lost) return 0;
        errno = code;
        return -1;
    }
    drain(Clock::now() + settings_.close_drain_timeout);
    // Bytes we wrote that are not known to have arrived may be lost: say
    // so, as close(2) reports a failed final write-back. Whether our Close
    // itself arrived does not matter: it carries no data.
    const bool lost = !all_written_confirmed() || wrote_after_peer_left_;
    const int code = error_ != 0 ? error_ : peer_disconnected_ ? ECONNRESET : ETIMEDOUT;
    end_close();
    if (!lost) return 0;
    errno = code;
    return -1;
}

void Stream::begin_close() {
    // A failover that is due begins before closing_ is set: an end that
    // begins it while closing cannot resume.
    const bool on_tcp = !closed_ && over_tcp();
    closing_ = true;
    // From now on fd() wakes only for events, never for readiness (unread
    // input, a refused write): a drain that waits on it must not spin.
    sleeping_for_ = short{0};
    if (on_tcp) {
        tcp_progress();
        return;
    }
    if (error_ == 0 && phase_ == Phase::Established) {
        close_queued_ = true;
        flush_control();
    }
}

bool Stream::drain_done() {
    if (phase_ != Phase::Established) return true;
    if (over_tcp()) return tcp_drain_done();
    if (!progress()) return true;  // failed: nothing more will complete
    // The Close is signalled and RC completes in order: its completion
    // means every byte before it reached the peer.
    if (close_sent_ && sq_.completed(close_seq_)) return true;
    // A peer that closed and disconnected takes nothing more. But its
    // disconnect can be seen before the completion of our Close, which
    // confirms our last bytes: wait for that (or a flush, after which
    // nothing completes) while any of our bytes are unconfirmed.
    // Held bytes cannot go to a peer that left: they are lost (close()
    // says so), and waiting would only spend the drain timeout.
    return peer_disconnected_ && (all_written_confirmed() || flushed_ || held_ > 0);
}

bool Stream::all_written_confirmed() const {
    // Acknowledged by the peer's device (staging is released only by
    // completions, in order), or consumed by its application, as its
    // CreditUpdate or Close said. Held bytes were never sent.
    return held_ == 0 && (staging_.in_use() == 0 || peer_.peer_consumed() == peer_.written());
}

void Stream::post_hold_at_end() {
    // Bytes a MSG_MORE write left in the staging buffer go out with the
    // next call of any other kind: no timer ever sends them, so a caller
    // that goes on to read, wait or poll must not find them still here. A
    // hold that has to wait for credits goes out with them (flush_control).
    if (held_ > 0 && phase_ == Phase::Established && !peer_disconnected_) (void)post_held();
}

void Stream::end_close() {
    if (closed_) return;
    if (failover_ == Failover::None) link_->disconnect();
    closed_ = true;
}

short Stream::readiness(short mask) const {
    // Only what `mask` asks is worked out: a reader's spin asks at every
    // poll, and whether a write could post (can_write_now) is the dear part.
    short r = 0;
    if ((mask & POLLIN) != 0 && (rx_.unread() > 0 || eof() || error_ != 0)) r |= POLLIN;
    // A write would not block: it would post, or fail at once (EPIPE, error).
    if ((mask & POLLOUT) != 0 &&
        (error_ != 0 || close_queued_ || peer_disconnected_ || (phase_ == Phase::Established && can_write_now())))
        r |= POLLOUT;
    if (peer_bytes_sent_) r |= POLLRDHUP;  // the peer shut down its side
    if (peer_disconnected_ || error_ != 0) r |= POLLHUP;
    if (error_ != 0) r |= POLLERR;
    return static_cast<short>(r & mask);
}

int Stream::flush() {
    if (closed_) return EBADF;
    if (over_tcp()) {
        tcp_progress();
        if (failover_ == Failover::Failed || tcp_error_ != 0) return tcp_error_;
        return failover_ == Failover::Exchanging || resend_from_ < resend_to_ ? EAGAIN : 0;
    }
    if (held_ > 0) {
        poll_completions();  // completions that free send queue slots, grants
        end_hold();
    }
    if (error_ != 0) return over_tcp() ? flush() : error_;
    if (held_ > 0 && peer_disconnected_) return EPIPE;  // they can never leave
    return held_ > 0 ? EAGAIN : 0;
}

std::size_t Stream::unread() const {
    if (failover_ == Failover::None) return rx_.unread();
    if (leftover_bytes() > 0 || failover_ != Failover::Tcp) return leftover_bytes();
    // Failed over and the ring's leftovers read: what the kernel holds.
    int queued = 0;
    return ::ioctl(tcp_fd_, FIONREAD, &queued) == 0 && queued > 0 ? static_cast<std::size_t>(queued) : 0;
}

short Stream::poll_events(short wanted) {
    if (closed_) return POLLNVAL;
    if (over_tcp()) return tcp_poll_events(wanted);
    progress();  // ends a hold (flush_control)
    if (over_tcp()) return tcp_poll_events(wanted);
    return readiness(static_cast<short>(wanted | POLLERR | POLLHUP));
}

short Stream::events_now(short wanted) {
    if (closed_) return POLLNVAL;
    if (over_tcp()) return tcp_readiness(wanted);
    end_hold();
    poll_completions();
    if (over_tcp()) return tcp_poll_events(wanted);
    return readiness(static_cast<short>(wanted | POLLERR | POLLHUP));
}

void Stream::set_interest(short events) {
    interest_ = events;
    if (closed_ && failover_ != Failover::None) return;
    if (!closed_ && over_tcp()) {
        tcp_progress();
        return;
    }
    // Decide from what the CQ holds now: a reply already there must not
    // make update_readiness() take the event and arm the CQ (two system
    // calls, and an interrupt for the next completion).
    if (!closed_) {
        end_hold();
        poll_completions();
    }
    if (!closed_ && over_tcp()) {
        tcp_progress();
        return;
    }
    update_readiness();
}

int Stream::sleep_for(short wanted, Millis timeout, unsigned& woke) {
    const auto outer = sleeping_for_;
    sleeping_for_ = wanted;
    update_readiness();
    const int rc = events_.wait(timeout, woke);
    const int saved_errno = errno;
    sleeping_for_ = outer;
    update_readiness();
    errno = saved_errno;
    return rc;
}

short Stream::spin_until_ready(short wanted, std::chrono::nanoseconds limit, bool reply,
                               std::optional<Clock::time_point>& seen) {
    const auto mask = static_cast<short>(wanted | POLLERR | POLLHUP);
    // The fast path makes no system call: completions already there, or
    // arriving within the spin budget, are caught without consuming events
    // or a wakeup (see adaptive_spin.hpp). The sources inside fd() are
    // asked only after a sleep they ended.
    poll_completions();
    const auto ready_now = [&] { return readiness(mask); };
    short r = ready_now();
    std::chrono::nanoseconds spun{0};
    if (r == 0 && limit.count() > 0 && settings_.busy_poll.count() > 0) {
        if (const auto budget = std::min(spin_.budget(reply), limit); budget.count() > 0) {
            seen = busy_poll(budget, seen ? *seen : Clock::now(), [&] { return ready_now() != 0; });
            r = ready_now();  // after the spin's last poll, or its error
            spin_.on_spin(r != 0);
            spun = budget;
        }
    }
    input_caught_ = (r & POLLIN) != 0 && rx_.unread() > 0;
    if (r != 0) flush_control();  // credit updates the spin made due
    last_spin_ = spun;
    return r;
}

short Stream::spin(short wanted) {
    if (closed_) return POLLNVAL;
    if (over_tcp()) return tcp_poll_events(wanted);
    end_hold();
    const bool reply = awaits_reply(wanted);
    // A reply wait an earlier spin() gave up, whose caller woke for
    // something else (a latch) and waits again: this spin goes on with it.
    // Taken out first, so that a reply this spin finds is timed here once.
    const auto continued = std::exchange(slept_reply_since_, std::nullopt);
    const auto earlier_spin = last_spin_;
    // The spin's budget counts from now, the reply's wait from its start.
    std::optional<Clock::time_point> seen = reply ? std::optional{Clock::now()} : std::nullopt;
    const auto began = continued ? continued : seen;
    const short r = spin_until_ready(wanted, std::chrono::nanoseconds::max(), reply, seen);
    if (over_tcp()) return tcp_poll_events(wanted);
    if (reply && (r & POLLIN) != 0) {
        if (continued) spin_.on_slept_wait(*seen - *began, earlier_spin);
        else spin_.on_wait(*seen - *began);
    }
    if (r == 0) ++stats_.waits_slept;  // caught nothing: the caller is on its way to sleep
    // A reply this spin missed is timed when it comes (handle_data), so
    // that the spin learns from the backend's sleeps as from wait()'s:
    // without them it saw only the replies it caught, and replies that came
    // just after it gave up never raised it (adaptive_spin.hpp).
    slept_reply_since_ = reply && (r & POLLIN) == 0 ? began : std::nullopt;
    return r;
}

void Stream::end_slept_reply_wait() {
    spin_.on_slept_wait(Clock::now() - *slept_reply_since_, last_spin_);
    slept_reply_since_.reset();
}

int Stream::wait(short wanted, Millis timeout) {
    if (closed_) return POLLNVAL;
    if (over_tcp()) return tcp_wait(wanted, timeout);
    end_hold();
    slept_reply_since_.reset();  // this wait times the reply itself
    // Decided before any polling: the reply that ends this wait clears it.
    const bool reply = awaits_reply(wanted);
    const bool timed = timeout.count() >= 0;
    // The clock only when something needs it (see busy_poll): a wait
    // without a timeout for more of a stream reads it only to spin.
    const auto start = reply || timed ? std::optional{Clock::now()} : std::nullopt;
    const auto deadline = timed ? *start + timeout : Clock::time_point::max();
    // The spin never outlasts the caller's timeout (busy_poll may be set
    // longer than a short timeout).
    const std::chrono::nanoseconds limit = timed ? std::chrono::nanoseconds{timeout} : std::chrono::nanoseconds::max();
    // The latest clock reading: a reply's wait is timed with the spin's own
    // readings (at most kPollsPerClockRead polls early), not another one.
    std::optional<Clock::time_point> seen = start;
    if (const short r = spin_until_ready(wanted, limit, reply, seen); r != 0) {
        if (over_tcp())
            return tcp_wait(wanted, timed ? std::max(Millis{0}, std::chrono::ceil<Millis>(deadline - Clock::now())) : Millis{-1});
        if (reply && (r & POLLIN) != 0) spin_.on_wait(*seen - *start);
        return r;
    }
    if (timeout.count() == 0) return poll_events(wanted);
    // The spin polled the completions. The sources inside fd() (a
    // completion's event, a keepalive tick, an rdma_cm event) are not asked
    // before the sleep: whatever they hold wakes it at once, and the wakeup
    // says which. That saves an epoll_wait per sleep, and leaving the
    // completion's event in the channel saves the eventfd's write and read.
    const auto mask = static_cast<short>(wanted | POLLERR | POLLHUP);
    short r = 0;
    bool slept = false;
    for (;;) {
        Millis left{-1};
        if (timed) {
            const auto now = Clock::now();
            if (now >= deadline) {
                r = poll_events(wanted);  // the last look, as poll(2) takes at its timeout
                break;
            }
            left = std::chrono::ceil<Millis>(deadline - now);
        }
        unsigned woke = 0;
        if (!std::exchange(slept, true)) ++stats_.waits_slept;
        const int rc = sleep_for(wanted, left, woke);
        if (rc < 0 && errno == EINTR) return -1;
        if (rc < 0) {
            r = poll_events(wanted);  // the wait could not say: ask every source
        } else {
            poll_completions();
            take_in(woke);
            r = readiness(mask);
        }
        if (over_tcp()) {
            const auto rest = timed ? std::max(Millis{0}, std::chrono::ceil<Millis>(deadline - Clock::now())) : Millis{-1};
            return tcp_wait(wanted, rest);
        }
        if (r != 0) break;
    }
    if (reply && (r & POLLIN) != 0) {
        const auto waited = Clock::now() - *start;
        if (slept) spin_.on_slept_wait(waited, last_spin_);
        else spin_.on_wait(waited);
    }
    return r;
}

}  // namespace pg_rdma::transport
