// The engine behind Connection: the byte stream protocol over a Link (link.hpp).
//
//   stream.cpp            read / write / shutdown / close
//   stream_datapath.cpp   completions, control messages, posting
//   stream_handshake.cpp  feature negotiation and RX ring exchange
//   stream_failover.cpp   moving onto the TCP connection when the QP fails
//
// All accounting lives in the small pure classes it composes (rx_ring.hpp,
// tx_window.hpp, credits.hpp, send_queue.hpp, keepalive.hpp), each unit
// tested on the host; this class only sequences them around verbs calls.
#pragma once

#include <poll.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/control.hpp"
#include "protocol/failover.hpp"
#include "transport/connection.hpp"
#include "transport/adaptive_spin.hpp"
#include "transport/credits.hpp"
#include "transport/error.hpp"
#include "transport/link.hpp"
#include "transport/event_set.hpp"
#include "transport/keepalive.hpp"
#include "transport/rx_ring.hpp"
#include "transport/send_queue.hpp"
#include "transport/tx_window.hpp"

namespace pg_rdma::transport {

enum class Role { Active, Passive };

class Stream {
public:
    using Clock = std::chrono::steady_clock;

    // Non-blocking setup. start() takes a connected endpoint (ESTABLISHED)
    // and sends the first handshake message (active side); then call
    // handshake_step() whenever fd() is readable until it says Done or
    // Failed. The caller owns the deadline: abandon_handshake() and dropping
    // the stream give up at any step and release everything
    // (HandshakeStage drives these for the setup objects).
    enum class SetupStep { InProgress, Done, Failed };
    static std::unique_ptr<Stream> start(std::unique_ptr<Link> link, Role role, Error& err);
    SetupStep handshake_step(Error& err);
    void abandon_handshake(const char* why);
    // This end has sent its RX ring and waits only for the peer's: from
    // here the peer can complete its side at any moment.
    [[nodiscard]] bool ring_sent() const { return phase_ == Phase::AwaitRing || phase_ == Phase::Established; }
    ~Stream();

    ssize_t read(void* buf, std::size_t len);
    // `more`: the caller has more to write right away (MSG_MORE), so the
    // bytes may be held to go out with the next ones as one WRITE (see
    // connection.hpp).
    ssize_t writev(const iovec* iov, int iovcnt, bool more = false);
    int shutdown_write();
    // Posts what MSG_MORE writes hold; returns the connection's error,
    // EAGAIN while a hold waits for credits or send queue room (it goes out
    // with the next progress), 0 when nothing is held.
    int flush();
    int close();
    [[nodiscard]] int fd() const { return events_.fd(); }

    // Readiness in poll(2) bits (see connection.hpp for their meaning),
    // after taking in the keepalive tick and rdma_cm events that wait (a
    // completion's event stays in the channel until the CQ is re-armed);
    // never blocks, never spins. POLLERR and POLLHUP are reported whatever
    // `wanted` says.
    short poll_events(short wanted);
    // The same without asking the sources inside fd(): no system call
    // (Connection::events_now).
    short events_now(short wanted);
    // Sleeps until poll_events(wanted) is non-zero or `timeout` passed
    // (negative: no limit). Busy-polls the CQ briefly first (AdaptiveSpin).
    // Returns the events, 0 on timeout, -1 with EINTR on a signal.
    int wait(short wanted, Millis timeout);
    // wait()'s busy-poll alone: polls completions for at most the adaptive
    // spin budget and returns what is ready, never sleeping. For a caller
    // that sleeps elsewhere (an interposed epoll_wait).
    short spin(short wanted);
    // The busy-poll's state (how long a reply wait would spin, from what
    // average), for tests and diagnostics.
    [[nodiscard]] const AdaptiveSpin& adaptive_spin() const { return spin_; }
    [[nodiscard]] std::string device_name() const { return link_ ? link_->device_name() : device_name_; }
    // Which readiness fd() signals. Until a caller says, POLLIN, or POLLOUT
    // while a write that said EAGAIN waits.
    void set_interest(short events);

    // The close() drain split for the exit handler, which drains many
    // connections at once against one deadline: begin_close() queues the
    // Close; drain_done() consumes events and says whether the Close was
    // acknowledged (or nothing more can happen); end_close() disconnects.
    void begin_close();
    bool drain_done();
    void end_close();
    [[nodiscard]] Millis close_drain_timeout() const { return settings_.close_drain_timeout; }
    [[nodiscard]] Millis setup_budget() const { return settings_.connect_timeout; }

    [[nodiscard]] const ConnectionStats& stats() const { return stats_; }
    // Bytes that have arrived and not been read (as of the last poll; after
    // a failover to TCP, the leftovers, then what the kernel holds).
    [[nodiscard]] std::size_t unread() const;
    [[nodiscard]] const std::string& failure_reason() const { return failure_reason_; }

    // --- failover (stream_failover.cpp)
    // The TCP connection the session was upgraded from, which both ends
    // keep open: watched for the peer's failover message, and the stream's
    // path once the queue pair fails (protocol/failover.hpp). The stream
    // keeps a number of its own for it (a close-on-exec dup), so the
    // caller's number may change or close. -1 forgets it. False with errno
    // when it cannot be kept or watched.
    bool attach_tcp(int fd);
    // The session moved onto TCP after the queue pair failed (and carries
    // on there); why RDMA failed; empty while it has not.
    [[nodiscard]] bool failed_over() const { return failover_ == Failover::Tcp; }
    [[nodiscard]] const std::string& failover_reason() const { return failover_reason_; }

private:
    explicit Stream(std::unique_ptr<Link> link);

    // --- handshake (stream_handshake.cpp)
    // Each side moves through these phases; messages out of turn are EPROTO.
    enum class Phase { AwaitOffer, AwaitAgreement, AwaitRing, Established };
    bool on_offer(const protocol::FeatureOffer& offer);
    bool on_agreement(const protocol::FeatureAgreement& agreed);
    bool on_peer_ring(const protocol::XferMemory& ring);
    bool apply_agreement(const protocol::FeatureAgreement& agreed, std::uint16_t peer_credits);
    [[nodiscard]] protocol::FeatureOffer local_offer() const;
    bool protocol_error(std::string_view why);
    [[nodiscard]] bool keepalive_agreed() const;

    // --- data path (stream_datapath.cpp)
    // Polls completions, CM events and the keepalive timer, then sends due
    // control messages. Returns false once the connection has failed.
    bool progress();
    // progress() for the sources that have something (EventSet bits), when
    // a wakeup has said which.
    bool take_in(unsigned pending);
    bool poll_completions();
    // Polls completions until `done()` or `budget` has passed since `from`
    // (a reading the caller already took); returns the latest reading, so
    // a caller timing its wait needs no reading of its own. The clock is
    // read once every kPollsPerClockRead polls: where clock_gettime is a
    // real system call (a guest whose clocksource has no vDSO: HPET, ACPI
    // PM timer; 0.9 us a call in the TCG guest) a completion that lands
    // during a reading waits for it to end, and a spin that catches its
    // completion within those polls reads it not at all. A spin outlasts
    // its budget by at most that many polls. In the guest, 32 instead of 8
    // took 0.6-0.9 us off the p50 at 64 B and about as much at 1 KiB (A/B,
    // perf/FINDINGS-archive.md).
    static constexpr int kPollsPerClockRead = 32;
    template <class Done>
    Clock::time_point busy_poll(std::chrono::nanoseconds budget, Clock::time_point from, Done done) {
        const auto until = from + budget;
        auto seen = from;
        while (seen < until) {
            for (int i = 0; i < kPollsPerClockRead; ++i) {
                if (error_ != 0 || done()) return seen;
                poll_completions();
            }
            seen = Clock::now();
        }
        return seen;
    }
    // A wait for `wanted` is a wait for the peer's reply: input alone, after
    // we sent data it has not answered yet (see adaptive_spin.hpp). A wait
    // that also wants POLLOUT is a writer waiting for room (libpq's blocked
    // send waits for either), whatever it sent before.
    [[nodiscard]] bool awaits_reply(short wanted) const {
        return (wanted & POLLIN) != 0 && (wanted & POLLOUT) == 0 && sent_since_heard_;
    }
    // Polls, spins at most `limit` (and the adaptive budget), says what is
    // ready. `seen` is a reading taken as the spin begins, by a caller that
    // needed the clock anyway (a reply, a timeout), or unset; it returns
    // the latest reading, the spin's last (a caught reply is timed with it).
    short spin_until_ready(short wanted, std::chrono::nanoseconds limit, bool reply,
                           std::optional<Clock::time_point>& seen);
    // The reply that a caller of spin() slept for came (slept_reply_since_).
    void end_slept_reply_wait();
    // Copies up to `len` unread bytes out of the RX ring and consumes them.
    std::size_t take_from_ring(std::uint8_t* out, std::size_t len);
    // Readiness, in poll(2) bits, from state alone: those of `mask` only.
    [[nodiscard]] short readiness(short mask) const;
    // Sleeps on fd() until something arrives for `wanted` (the readiness
    // signal narrowed to it, so what is already there but not wanted, such
    // as unread input for a writer, does not wake it). As EventSet::wait.
    // `woke` says which sources inside fd() have something after it.
    int sleep_for(short wanted, Millis timeout, unsigned& woke);
    bool handle_completion(const ibv_wc& wc);
    bool handle_receive(const ibv_wc& wc);
    bool handle_data(std::uint32_t len);
    bool handle_control(const protocol::ControlMessage& msg);
    bool handle_peer_close(const protocol::CloseMessage& msg);
    void handle_cm_events();
    void handle_keepalive_tick();
    bool send_probe();
    void on_peer_gone();
    bool send_control(const protocol::ControlMessage& msg, bool force_signal);
    // Posts what is due: held bytes, a CreditUpdate, the Close. Inline, as
    // it runs at the end of every read and wait and mostly finds nothing.
    void flush_control() {
        if (held_ > 0 || credit_update_pending_ || (close_queued_ && !close_sent_)) post_due();
    }
    void post_due();
    // Takes up to `len` bytes into the hold; posts the hold unless `more`
    // and it can still grow. Returns the bytes taken (0: blocked or failed).
    std::uint32_t post_data(const std::uint8_t* src, std::uint32_t len, bool more);
    // How many of `want` bytes can join the hold (one message: contiguous
    // in the peer's ring unless both ends agreed on kRingWrap, and in
    // staging unless the link gathers across its end; kMaxWriteBytes at
    // most).
    [[nodiscard]] std::uint32_t hold_room(std::uint32_t want) const;
    // Copies `len` bytes (at most hold_room's) to the staging head.
    void fill_staging(const std::uint8_t* src, std::uint32_t len);
    // The common write (a query, a reply): nothing held, no MSG_MORE, and
    // all `len` bytes fit one message now. Copies and posts them without the
    // hold's bookkeeping; false, having done nothing, when they do not fit
    // (post_data's way then decides). A failed post leaves error_ set.
    bool post_whole(const std::uint8_t* src, std::size_t len);
    // Posts the held bytes as one message: a WRITE WITH IMM, preceded by a
    // plain WRITE when it crosses the end of the peer's ring (kRingWrap);
    // true when nothing is held any more. False without credits or room in
    // the send queue.
    bool post_held();
    // post_held() where a call other than a MSG_MORE write begins. Inline:
    // every read and wait calls it, and mostly nothing is held.
    void end_hold() {
        if (held_ > 0) post_hold_at_end();
    }
    void post_hold_at_end();
    // The staging position up to which bytes are posted (the hold excluded):
    // what a control or probe WR's completion may release.
    [[nodiscard]] std::uint64_t posted_staging_head() const { return staging_.head() - held_; }
    // Takes as much of the vector as fits now; returns the bytes taken.
    std::size_t post_iov(const iovec* iov, int iovcnt, bool more);
    ssize_t write_to_departed_peer(std::size_t wanted);
    // Credits and send-queue room for one more message (two slots where it
    // may cross the end of the peer's ring).
    [[nodiscard]] bool data_room() const;
    [[nodiscard]] bool can_write_now() const;
    void fail(int code);

    // --- failover (stream_failover.cpp)
    enum class Failover {
        None,        // on RDMA
        Exchanging,  // our failover message is sent; awaiting the peer's
        Tcp,         // on TCP: staging bytes the peer lacks go first
        Failed,      // could not move: tcp_error_ says why
    };
    // Whether a failure with `code` can be mended by moving onto TCP.
    [[nodiscard]] bool failover_eligible(int code) const;
    // How long an end waits for the peer's failover message while the
    // peer's host has not acknowledged ours: the keepalive timeout.
    [[nodiscard]] Millis failover_wait() const;
    // Public calls begin with this: starts a failover that fail() or the
    // peer's message asked for, and says whether the TCP path serves the
    // call.
    bool over_tcp() {
        if (failover_wanted_ && failover_ == Failover::None) begin_failover();
        return failover_ != Failover::None;
    }
    void begin_failover();
    // Takes in a completion polled after the failure: data that landed,
    // sends the peer acknowledged; false when the ring's accounting broke.
    bool salvage_completion(const ibv_wc& wc);
    bool salvage_completions();
    void on_tcp_event();
    void failover_failed(int code, std::string why);
    // Copies what the failover needs out of the verbs buffers and destroys
    // the link (queue pair, buffers, rdma_cm id), so that a device being
    // removed is let go.
    void keep_and_release_device();
    [[nodiscard]] std::size_t leftover_bytes() const { return leftover_.size() - leftover_pos_; }
    // Reads the peer's failover message, resends, updates fd()'s sources.
    void tcp_progress();
    void read_peer_failover();
    void push_resend();
    void update_tcp_registration();
    [[nodiscard]] short tcp_readiness(short wanted);
    std::size_t copy_leftovers(std::uint8_t* out, std::size_t len);
    ssize_t tcp_read(void* buf, std::size_t len);
    ssize_t tcp_writev(const iovec* iov, int iovcnt, bool more);
    short tcp_poll_events(short wanted);
    int tcp_wait(short wanted, Millis timeout);
    [[nodiscard]] bool tcp_drain_done();
    // Whether update_readiness() may arm the CQ (a system call with rxe).
    enum class Arm {
        kIfIdle,  // the caller may sleep on fd() next: arm if nothing is signalled
        kNever,   // it will call again before sleeping: leave a disarmed CQ's fd() signalled
    };
    // Brings fd()'s readiness up to date, and may arm the CQ (kIfIdle).
    // Without kIfIdle a CQ that is not armed leaves fd() signalled whatever
    // is ready: nothing to work out, on the path of every write (inline).
    void update_readiness(Arm arm = Arm::kIfIdle) {
        if (arm == Arm::kNever && !cq_armed_) {
            events_.set_ready(!completion_event_pending_);
            return;
        }
        work_out_readiness(arm);
    }
    void work_out_readiness(Arm arm);
    void arm_completions(bool solicited_only);
    // Whether a sleeper must wake for unsolicited completions too, whatever
    // it waits for (see update_readiness).
    [[nodiscard]] bool wants_every_completion() const;
    // The peer's Close came and we read every byte it counted.
    [[nodiscard]] bool eof() const { return peer_bytes_sent_ && rx_.consumed() == *peer_bytes_sent_; }
    // Every byte written is known to have reached the peer.
    [[nodiscard]] bool all_written_confirmed() const;
    // Waits until drain_done() or `deadline`; true if drain_done().
    bool drain(Clock::time_point deadline);


    std::unique_ptr<Link> link_;
    EventSet events_;
    Settings settings_;

    RxRing rx_;
    PeerRingWindow peer_;
    TxStaging staging_;
    const bool staging_wraps_;  // link_->staging_may_wrap(), asked once
    bool ring_wraps_ = false;   // feature::kRingWrap agreed: messages may cross the end of either ring
    SendQueue sq_;
    SendCredits send_credits_;
    RecvCredits recv_credits_;
    KeepaliveClock keepalive_;
    AdaptiveSpin spin_;
    // How long spin_until_ready() last spun (zero: not at all), for a wait
    // that sleeps after it (AdaptiveSpin::on_slept_wait).
    std::chrono::nanoseconds last_spin_{0};
    // A reply wait that spin() gave up and its caller sleeps out on fd()
    // (the backend's WaitEventSet): when it began. The reply's arrival
    // (handle_data) times it for the spin, as wait() times its own sleeps.
    std::optional<Clock::time_point> slept_reply_since_;

    std::uint64_t peer_ring_addr_ = 0;
    std::uint32_t peer_ring_rkey_ = 0;
    std::uint16_t peer_credits_ = 0;  // receive WRs the peer posts for us (its queue depth)
    Phase phase_ = Phase::AwaitOffer;
    std::uint8_t version_ = protocol::kMinProtocolVersion;  // format of what we send
    std::string failure_reason_;  // why the handshake or the peer failed, for Error

    bool close_queued_ = false;      // shutdown(SHUT_WR) asked for a Close
    bool close_sent_ = false;        // ... and it is posted
    std::uint64_t close_seq_ = 0;    // its send WR
    bool closing_ = false;           // close() is draining
    bool closed_ = false;            // close() ran; every call is EBADF now
    std::optional<std::uint64_t> peer_bytes_sent_;  // the peer's Close
    int error_ = 0;                  // sticky errno once the connection failed
    bool peer_disconnected_ = false; // the peer closed and then disconnected
    bool wrote_after_peer_left_ = false;  // write_to_departed_peer took its one write
    bool flushed_ = false;           // a work request was flushed: the QP is in error
    bool write_blocked_ = false;     // a write saw EAGAIN; fd() also signals POLLOUT
    // Bytes at the staging head that MSG_MORE writes took and no WRITE
    // carries yet (post_data): they go out when the hold cannot grow, with
    // a write without MSG_MORE, or at the next call of another kind.
    std::uint32_t held_ = 0;
    bool cq_armed_ = true;           // armed, or fired unnoticed: fd() wakes for the next completion
    bool armed_solicited_only_ = false;  // ... the next solicited one only
    // The CQ fired and its event is still in the completion channel, which
    // keeps fd() readable: it is taken when the CQ is armed again.
    bool completion_event_pending_ = false;
    std::optional<short> interest_;  // what fd() signals (set_interest); default below
    int empty_reads_ = 0;            // read() calls in a row that found nothing
    bool input_caught_ = false;      // the last wait's spin polled and found input: read() need not poll
    std::optional<short> sleeping_for_;  // inside sleep_for(): fd() signals only this
    bool credit_update_pending_ = false;
    bool refused_ = false;           // we answered the peer's offer with a refusal
    std::optional<Clock::time_point> refusal_linger_until_;
    // Keepalive evidence and activity since the last tick: flags, so the
    // data path never reads the clock (see handle_keepalive_tick).
    bool heard_since_tick_ = false;
    bool sent_since_tick_ = false;
    // We wrote data since the peer's last data arrived: input awaited now is
    // a reply (awaits_reply).
    bool sent_since_heard_ = false;
    ConnectionStats stats_;

    // Failover (stream_failover.cpp).
    FileDescriptor tcp_copy_;          // our own number for the session's TCP connection
    int tcp_fd_ = -1;                  // tcp_copy_'s, -1 without one
    std::uint32_t tcp_watched_ = 0;    // its epoll events in fd() (0: not watched)
    bool tcp_gone_ = false;            // it ended (EOF, reset): nothing can move onto it
    bool failover_wanted_ = false;     // fail() met a fault that TCP can mend
    bool salvage_broken_ = false;      // a completion taken after the fault did not add up
    bool failover_refused_ = false;    // the peer asked after a failure of ours TCP cannot mend
    protocol::FailoverMessage own_failover_;  // what we sent
    Failover failover_ = Failover::None;
    Clock::time_point failover_deadline_{};
    std::array<std::uint8_t, protocol::kFailoverMessageSize> peer_failover_{};
    std::size_t peer_failover_have_ = 0;
    std::vector<std::uint8_t> leftover_;  // arrived over RDMA, not read yet
    std::size_t leftover_pos_ = 0;
    std::vector<std::uint8_t> kept_;      // our stream from kept_from_ on, not known to have arrived
    std::uint64_t kept_from_ = 0;
    std::uint64_t resend_from_ = 0;    // stream positions still to send on TCP
    std::uint64_t resend_to_ = 0;
    std::string device_name_;          // the link's, once it is gone
    bool tcp_shutdown_pending_ = false;  // shutdown(SHUT_WR) once the resend is out
    int tcp_error_ = 0;                // sticky errno of the TCP path
    std::string failover_reason_;
};

}  // namespace pg_rdma::transport
