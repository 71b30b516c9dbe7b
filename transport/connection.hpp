// A reliable, ordered byte stream over one RC queue pair, used like a
// non-blocking socket. Every call is noexcept: failures are -1 and errno
// (ENOMEM when memory ran out), never an exception.
//
// Contract (POSIX style: -1 and errno on failure):
//   read()   returns bytes, or 0 once the peer closed and every byte it wrote
//            before closing has been delivered; EAGAIN at once when nothing
//            is there yet (it never spins or sleeps); ECONNRESET when the
//            peer vanished without closing (bytes that had already arrived
//            are delivered first); ETIMEDOUT when nothing proved the peer
//            alive for the keepalive timeout; EPROTO when the peer broke the
//            protocol (the connection is then closed).
//   write()/writev() return bytes accepted (maybe fewer than asked), 0 for
//            zero bytes, EAGAIN when the peer's ring, the credits or the local
//            staging buffer are full, EPIPE after shutdown(SHUT_WR). Once
//            the peer closed and went away, the first write is taken and its
//            bytes lost, as TCP takes one before the peer's RST, and the
//            next ones fail with EPIPE (close() then returns -1). The pieces
//            of one writev() travel together (one RDMA WRITE where they fit).
//   send(buf, len, flags) is write() with send(2)'s flags: MSG_MORE says
//            more bytes follow at once, so these may be held in the staging
//            buffer and go out with them as one RDMA WRITE (fewer, larger
//            writes: fewer completions and wakeups at the peer). A hold goes
//            out when it reaches 64 KiB or cannot grow, with the next send
//            without MSG_MORE, and at the start of any other call (read,
//            wait, spin, poll_events, events_now, set_interest, flush,
//            shutdown, close), or with the first progress after that if it
//            had to wait for credits. Unlike TCP's there is no timer: a
//            caller that sends with MSG_MORE and then stops calling holds
//            the bytes until its next call, and one that sleeps on fd()
//            must call set_interest() or flush() first. MSG_DONTWAIT and
//            MSG_NOSIGNAL change nothing (no call blocks, none raises
//            SIGPIPE); other flags: EOPNOTSUPP.
//   poll_events(wanted) answers poll(2)'s question without blocking:
//            POLLIN    read() would not say EAGAIN (data, EOF or an error)
//            POLLOUT   write() would not say EAGAIN
//            POLLRDHUP the peer shut down its side (its Close arrived)
//            POLLHUP   the peer is gone: closed and disconnected (one more
//                      write is still taken, see write()), or failed
//            POLLERR   the connection failed (read/write give the errno)
//            POLLERR and POLLHUP are reported whatever `wanted` says, as by
//            poll(2). readable()/writable()/peer_closed()/failed() are the
//            same answers one at a time.
//   wait(wanted, timeout_ms) sleeps until poll_events(wanted) is non-zero;
//            returns the events, 0 on timeout, -1 with EINTR on a signal.
//            Only what was asked for wakes it: a writer waiting for POLLOUT
//            is not woken by unread input, nor any waiter by keepalive
//            ticks. It busy-polls briefly before sleeping (Settings::
//            busy_poll, adaptive: longer for a reply, not at all while
//            spins catch nothing; adaptive_spin.hpp), which is where the
//            spin belongs: only a caller about to sleep pays for it.
//   fd()     one pollable descriptor, for callers that wait in their own
//            poll/epoll; it only ever turns readable (POLLIN on fd()), so say
//            what you wait for with set_interest() (an interposer passes on
//            the events its caller asked for). Without it, fd() signals POLLIN
//            readiness, or POLLOUT readiness while a write that said EAGAIN
//            waits. fd() also turns readable on internal events (completions,
//            keepalive ticks: one wakeup per tick, i.e. two per keepalive
//            interval on an idle connection) that may not make the connection
//            ready: after a wakeup, call poll_events() or retry the I/O, and
//            wait again. The completion queue is armed only where a sleep may
//            follow: poll_events(), set_interest(), wait(), a write's EAGAIN,
//            a second read EAGAIN in a row. After a successful write or a
//            first read EAGAIN fd() stays readable until then, so a caller
//            that sleeps right there wakes once more (one more read).
//            fd() may be any number, also above FD_SETSIZE:
//            never select() on it.
//   shutdown(SHUT_WR) sends Close after the bytes already written.
//   close()  Close, then waits up to Settings::close_drain_timeout for every
//            queued send to complete, then disconnects; -1 when bytes written
//            were not acknowledged by the peer's device, i.e. may be lost:
//            ETIMEDOUT (no answer in time), ECONNRESET (the peer went away
//            first) or the connection's error. EBADF when already closed or
//            in a forked child. The destructor closes (waiting at most
//            close_drain_timeout for a call another thread is inside).
//
// Bytes written are delivered even if the process exits without closing: an
// exit handler drains every connection this process still owns, all at once
// against one deadline (a PostgreSQL backend sends its last FATAL message and
// exits without closing its socket). It skips a connection another thread is
// inside at that moment.
//
// Failover: when the queue pair fails mid-session (the link down past the
// retry limit, the device removed) and both ends agreed on it (protocol
// feature kTcpFailover), the stream moves onto the TCP connection the
// session was upgraded from (attach_tcp) and carries on: each end says on
// TCP how much of the other's stream it holds, each resends from there
// (protocol/failover.hpp). Meanwhile reads deliver what had arrived and
// writes say EAGAIN; fd() keeps its number. Where that cannot be done
// without losing or repeating a byte (the peer is gone, an end was
// closing, a completion the peer never saw freed bytes it lacks), calls
// fail with the errno and failure_reason() says "RDMA failed (...) and the
// session could not move onto TCP: ...". An end waits for the peer's
// answer as long as the peer's host acknowledges its own message on TCP
// (a peer process that is busy answers later, as a TCP session waits for
// it), and ends the session when the host has not acknowledged it within
// the keepalive timeout.
//
// Threads and signals: one connection belongs to one thread at a time. A
// call made while another call on the same connection is in progress (a
// second thread, or a signal handler that interrupted the owner, such as
// PostgreSQL's quickdie) fails with EIO instead of re-entering the data path.
// Different connections may be used by different threads.
//
// Fork: verbs resources belong to the process that created the connection,
// and a queue pair cannot follow fork() (the kernel refuses a child's verbs
// calls on the inherited descriptor, and the pinned pages stay the
// parent's). So after a fork, a connection that no call was inside is
// offered to both processes, and the first to use it keeps it:
//   - the parent keeps it by making any call on it (the usual case: a
//     child that execs or never touches it);
//   - the child takes it with adopt_in_child(), which returns a plain
//     socket (AF_UNIX) carrying the same byte stream: a thread in the
//     parent relays it over the queue pair (pg_basebackup -X stream opens
//     its WAL connection and then streams in a forked child). The parent's
//     calls then fail with EBADF, its close() succeeds and does nothing,
//     and its exit waits (bounded by close_drain_timeout) for the relay to
//     finish the child's last bytes. The stream lives as long as the
//     parent does.
// A connection whose offer is still open is not offered again by a later
// fork, and a grandchild never inherits its parent's offer. Every call made
// directly on the object in a child fails with EBADF (fd() is -1),
// destroying the inherited object leaves the parent's queue pair alone, and
// the child's exit handler does not touch it. (A child made by fork() or
// posix_spawn; one made by a raw clone() or _Fork(), which run no
// pthread_atfork handlers, is not recognised as a child.)
//
// Signal handlers: a call from a handler that interrupted another call on
// the same connection fails (EIO, above); one that interrupted anything else
// runs the data path as any call would, which may allocate on error paths:
// fine for PostgreSQL's handlers, which already risk that, not async-signal-
// safe in the strict sense.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <poll.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "transport/call_claim.hpp"

namespace pg_rdma::transport {

class Stream;

// Figures for observability (pg_stat_rdma) and tests.
struct ConnectionStats {
    std::uint64_t bytes_sent = 0;       // posted (a MSG_MORE hold counts once it goes out)
    std::uint64_t bytes_received = 0;
    std::uint64_t writes_posted = 0;    // RDMA WRITE WITH IMM work requests
    std::uint64_t control_sent = 0;     // control messages sent
    std::uint64_t control_received = 0;
    std::uint64_t write_blocked = 0;    // times write() returned EAGAIN
    std::uint64_t waits_slept = 0;      // calls of wait() that slept on fd() (after a spin that caught nothing, or none), and of spin() that caught nothing (its caller then sleeps on fd())
    std::uint64_t keepalive_probes = 0; // liveness probes sent while idle
    std::uint32_t rx_buffer_size = 0;   // ours
    std::uint32_t peer_rx_buffer_size = 0;
    std::uint8_t protocol_version = 0;  // negotiated
    std::uint64_t features = 0;         // negotiated
    std::uint32_t keepalive_interval_ms = 0;  // negotiated (meaningful with feature::kKeepalive)
    std::uint32_t keepalive_timeout_ms = 0;
    bool failed_over = false;           // the queue pair failed and the session went on over TCP
};

class Connection {
public:
    explicit Connection(std::unique_ptr<Stream> stream) noexcept;
    ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    ssize_t read(void* buf, std::size_t len) noexcept;
    ssize_t write(const void* buf, std::size_t len) noexcept;
    ssize_t writev(const struct iovec* iov, int iovcnt) noexcept;
    ssize_t send(const void* buf, std::size_t len, int flags) noexcept;
    // Posts what MSG_MORE sends hold. 0 when nothing is held any more; -1
    // with EAGAIN while the hold waits for the peer's credits or send queue
    // room (the next call that makes progress posts it), with EPIPE when
    // the peer closed and left first (they can never go), or with the
    // connection's error.
    int flush() noexcept;
    int shutdown(int how) noexcept;
    int close() noexcept;

    [[nodiscard]] int fd() const noexcept;
    // See the contract above. poll_events() returns POLLNVAL when the
    // connection is closed or not this process's, and 0 while another call
    // is in progress.
    short poll_events(short wanted) noexcept;
    bool readable() noexcept { return (poll_events(POLLIN) & POLLIN) != 0; }
    bool writable() noexcept { return (poll_events(POLLOUT) & POLLOUT) != 0; }
    bool peer_closed() noexcept { return (poll_events(POLLRDHUP) & (POLLRDHUP | POLLHUP)) != 0; }
    bool failed() noexcept { return (poll_events(0) & POLLERR) != 0; }
    int wait(short wanted, int timeout_ms) noexcept;
    // wait()'s busy-poll without the sleep: at most the adaptive spin budget
    // (Settings::busy_poll), then what is ready (0 if nothing). For a caller
    // about to sleep in its own epoll_wait on fd(): a reply that comes after
    // spin() gave up is timed for the adaptive spin when it is taken in, as
    // wait() times its own sleeps.
    short spin(short wanted) noexcept;
    // What fd() signals; returns -1 (EBADF) when the connection is unusable.
    int set_interest(short events) noexcept;
    // poll_events() from what is known without a system call: completions
    // are polled, but the sources inside fd() (a completion's event, a
    // keepalive tick, an rdma_cm event) are not asked. For a caller about
    // to sleep on fd() after set_interest(): whatever those hold wakes that
    // sleep at once, and poll_events() after the wakeup takes it in. Only
    // for a level-triggered sleeper: an edge already reported does not
    // come again.
    short events_now(short wanted) noexcept;

    [[nodiscard]] ConnectionStats stats() const noexcept;
    // Bytes that have arrived and wait to be read, as the last
    // poll_events() or read found them: data, as opposed to the EOF or
    // error that also make the connection readable.
    [[nodiscard]] std::size_t unread_bytes() const noexcept;
    // What FIONREAD says of a socket: takes in what has arrived, then the
    // bytes waiting to be read (0 at EOF, though EOF makes it readable); 0
    // while another call is in progress or when the connection is unusable.
    [[nodiscard]] std::size_t readable_bytes() noexcept;
    // The RDMA device the connection runs on ("rxe0"); empty when unusable.
    [[nodiscard]] std::string device_name() const noexcept;
    // False in a process forked after the connection was made, where every
    // call fails with EBADF (a queue pair does not follow fork()).
    [[nodiscard]] bool made_in_this_process() const noexcept;
    // In a forked child: takes the connection its parent offered at the
    // fork (see Fork above) and returns a blocking, close-on-exec AF_UNIX
    // stream socket carrying the session from here on. -1 with EBADF when
    // there is no offer, or the parent used the connection first, or
    // another child took it; EINVAL in the process that made it.
    int adopt_in_child() noexcept;
    // Why the connection failed, in words for a log line; empty while it works.
    [[nodiscard]] std::string failure_reason() const noexcept;
    // The TCP connection the session was upgraded from (the upgrade
    // attaches it): when the queue pair fails mid-session the stream moves
    // onto it, with no byte lost or repeated, and carries on (Failover
    // above). The connection keeps its own close-on-exec number for it (one
    // descriptor more), so the caller may move or close its own; the socket
    // then stays open as long as the connection. -1 forgets it. 0, or -1
    // with errno.
    int attach_tcp(int tcp_fd) noexcept;
    // Why RDMA failed, once the session has moved onto TCP; empty before.
    // stats().failed_over says the same.
    [[nodiscard]] std::string failover_reason() const noexcept;

    // Drains and disconnects every connection this process still owns.
    // Registered with atexit() when the first connection is made; safe to
    // call more than once.
    static void close_all_at_exit() noexcept;

private:
    class Use;
    friend class ForkHandover;
    [[nodiscard]] bool usable() const noexcept;
    // usable(), and in the parent after a fork takes the connection back
    // from the offer (false once a child took it). Called with in_use_ held.
    // Inline, defined in connection.cpp, the only place that calls it.
    inline bool claimable() noexcept;
    // claimable() for a connection that is not simply this
    // process's: out of line, so that every call's check stays short.
    bool keep_offered(std::uint64_t state) noexcept;
    // A call that found in_use_ held by fork()'s offer (offer_seq_) waits for
    // it (a socketpair() call) instead of failing; true once it holds
    // in_use_. A call from the offering thread itself (a signal handler that
    // interrupted the fork) fails at once.
    bool wait_out_fork_offer() noexcept;
    [[nodiscard]] bool handed_to_child() const noexcept;
    // The watcher's side of a child's claim (fork_handover.hpp), each under
    // the registry lock and checking `c` is still alive: the stream, or
    // nullptr when the offer of `generation` is no longer open; whether it
    // is still open; the stream back when the child went before the answer.
    static std::unique_ptr<Stream> give_to_child(Connection* c, std::uint64_t generation) noexcept;
    static bool offer_open(Connection* c, std::uint64_t generation) noexcept;
    static void take_back(Connection* c, std::uint64_t generation, std::unique_ptr<Stream> stream) noexcept;
    // In a child after fork: this fork's end of the offer, or none.
    void keep_offer(int fd) noexcept;
    void forget_offer() noexcept;
    std::unique_ptr<Stream> stream_;
    pid_t owner_pid_;
    // generation << 2 | ForkState (connection.cpp): whether the latest
    // fork's offer is open, kept by this process, or taken by a child.
    std::atomic<std::uint64_t> fork_state_{0};
    // The thread (its kernel id) of fork()'s prepare handler while it looks
    // at this connection under in_use_, else 0: another thread's call is
    // then only delayed, not refused.
    std::atomic<pid_t> offering_{0};
    // Odd while an offer is under way, raised at its start and its end: a
    // call whose try failed tells from it whether an offer that has ended
    // since could have been the holder, when offering_ is already back to 0.
    std::atomic<std::uint32_t> offer_seq_{0};
    // In a child: its end of the offer made at its fork (-1: none), and
    // that socket's inode, so a number the program closed and reused for
    // another file is never written to or closed.
    int child_offer_fd_ = -1;
    ino_t child_offer_ino_ = 0;
    // fd() without touching stream_, which a child's claim moves away.
    std::atomic<int> fd_{-1};
    // Held by every call for its duration; try-locked, so a nested or
    // concurrent call fails instead of waiting or re-entering.
    CallClaim in_use_;
};

}  // namespace pg_rdma::transport
