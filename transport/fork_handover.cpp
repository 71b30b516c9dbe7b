#include "transport/fork_handover.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <mutex>
#include <thread>
#include <utility>

#include "transport/connection.hpp"
#include "transport/stream.hpp"
#include "transport/stream_relay.hpp"

namespace pg_rdma::transport {
namespace {

// The claim exchange on an offer's socket pair: one byte each way, before
// any byte of the session.
constexpr char kClaim = 'C';
constexpr char kGranted = 'Y';
constexpr char kRefused = 'N';
// After a poll() failure other than EINTR, the watcher waits this long
// before it tries again, rather than spin.
constexpr std::chrono::milliseconds kWatchRetryInterval{10};
// How often the exit handler looks at the relay count.
constexpr std::chrono::milliseconds kRelayPollInterval{5};

std::atomic<std::uint64_t> g_fork_generation{0};

// Relays running in this process, for the exit wait. A bare counter, not a
// lock: the exit handler also runs in forked children.
std::atomic<int> g_relays_running{0};

// The open offers of this process and the thread that answers them. Leaked:
// a detached thread may outlive static destructors. The lock is held across
// fork() (prepare_fork), so no process inherits it held.
struct Watcher {
    std::mutex lock;
    std::vector<ForkOffer> offers;  // parent ends; the watcher closes each
    bool running = false;           // a watch() thread serves `offers`
    std::atomic<int> wake_fd{-1};   // eventfd: offers added, or one was kept
};
Watcher& watcher() {
    static auto* w = new Watcher();
    return *w;
}

// A thread with every signal blocked, so the application's signals (SIGINT,
// SIGCHLD, PostgreSQL's) keep going to its own threads. False when it
// could not be started.
template <class Body>
bool start_quiet_thread(Body body) noexcept {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    bool started = true;
    try {
        std::thread(std::move(body)).detach();
    } catch (...) {
        started = false;
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return started;
}

void close_quietly(int& fd) noexcept {
    if (fd >= 0) ::close(fd);
    fd = -1;
}

// Ends a socket for its peer even when a later fork's child holds a copy of
// this end (close() alone would then deliver no EOF).
void end_socket(int fd) noexcept {
    if (fd < 0) return;
    (void)::shutdown(fd, SHUT_RDWR);
    ::close(fd);
}

void wake(int fd) noexcept {
    const std::uint64_t one = 1;
    if (fd >= 0) (void)!::write(fd, &one, sizeof one);
}

// Whether the offer's end is still the socket the offer made.
bool still_ours(const ForkOffer& o) noexcept {
    struct stat st {};
    return o.parent_fd >= 0 && ::fstat(o.parent_fd, &st) == 0 && st.st_ino == o.parent_ino;
}

// Ends the parent's end of an offer the parent kept, unless the program
// has closed that number and it is another file's by now.
void end_kept_offer(const ForkOffer& o) noexcept {
    if (still_ours(o)) end_socket(o.parent_fd);
}

// Takes `fd`'s offer out of the watcher's list; false if it was not there.
bool remove_offer(int fd) noexcept {
    Watcher& w = watcher();
    const std::lock_guard guard(w.lock);
    const auto it = std::find_if(w.offers.begin(), w.offers.end(), [&](const ForkOffer& o) { return o.parent_fd == fd; });
    if (it == w.offers.end()) return false;
    w.offers.erase(it);
    return true;
}

}  // namespace

void ForkHandover::prepare_fork() noexcept { watcher().lock.lock(); }

bool ForkHandover::offer(Connection& c, ForkOffer& out) noexcept {
    // A call inside: it stays the parent's. The lock is not kept: a call
    // that starts after this keeps the connection (kOwned), and the
    // watcher's compare-and-swap then refuses the child. offering_ makes a
    // call that meets the lock held here wait instead of failing.
    c.offering_.store(::gettid(), std::memory_order_release);
    c.offer_seq_.fetch_add(1, std::memory_order_seq_cst);  // odd: under way
    std::atomic_thread_fence(std::memory_order_seq_cst);    // before the claim's exchange
    if (!c.in_use_.try_lock()) {
        c.offer_seq_.fetch_add(1, std::memory_order_seq_cst);
        c.offering_.store(0, std::memory_order_release);
        return false;
    }
    const std::uint64_t state = c.fork_state_.load(std::memory_order_acquire);
    int pair[2] = {-1, -1};
    // An offer still open from an earlier fork stays that fork's.
    const bool offerable = c.usable() && (state & kStateMask) == kOwned &&
                           ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0;
    if (offerable) {
        const std::uint64_t generation = g_fork_generation.fetch_add(1, std::memory_order_relaxed) + 1;
        c.fork_state_.store(generation << kGenerationShift | kOffered, std::memory_order_release);
        struct stat st {};
        out = ForkOffer{&c, generation, pair[0], pair[1], ::fstat(pair[0], &st) == 0 ? st.st_ino : 0};
    }
    c.in_use_.unlock();
    c.offer_seq_.fetch_add(1, std::memory_order_seq_cst);  // even: ended
    c.offering_.store(0, std::memory_order_release);
    return offerable;
}

void ForkHandover::withdraw(ForkOffer& offer) noexcept {
    close_quietly(offer.parent_fd);
    close_quietly(offer.child_fd);
    // Still kOffered: the next call keeps it.
}

void ForkHandover::parent_after_fork(std::vector<ForkOffer>& offers) noexcept {
    Watcher& w = watcher();
    for (ForkOffer& o : offers) close_quietly(o.child_fd);
    if (!offers.empty()) {
        if (w.wake_fd.load() < 0) w.wake_fd.store(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
        bool queued = w.wake_fd.load() >= 0;
        if (queued) {
            try {
                w.offers.insert(w.offers.end(), offers.begin(), offers.end());
                offers.clear();
            } catch (...) {
                queued = false;
            }
        }
        // Unserved, an offer is closed: its child end sees EOF, a claim is
        // refused, and the parent keeps its connection.
        for (ForkOffer& o : offers) end_socket(std::exchange(o.parent_fd, -1));
        if (queued && !w.running) {
            w.running = start_quiet_thread([] { watch(); });
            if (!w.running) {  // no thread: nobody serves any of them
                for (ForkOffer& o : w.offers) end_socket(std::exchange(o.parent_fd, -1));
                w.offers.clear();
            }
        }
        // A call may have kept a connection between the offer and now,
        // before any watcher could be woken: have it look at once.
        if (queued && w.running) wake(w.wake_fd.load());
    }
    w.lock.unlock();
}

void ForkHandover::child_after_fork(std::vector<ForkOffer>& offers, const std::vector<Connection*>& live) noexcept {
    // Ends inherited from earlier forks are not this child's to claim with:
    // a grandchild asking on its parent's end could take the session from
    // under the process it belongs to.
    for (Connection* c : live) c->forget_offer();
    for (ForkOffer& o : offers) {
        close_quietly(o.parent_fd);
        o.connection->keep_offer(std::exchange(o.child_fd, -1));
    }
    // The parent's watcher, offers and relays are not this process's.
    Watcher& w = watcher();
    for (ForkOffer& o : w.offers) close_quietly(o.parent_fd);
    w.offers.clear();
    w.running = false;
    int wake_fd = w.wake_fd.exchange(-1);
    close_quietly(wake_fd);
    g_relays_running.store(0, std::memory_order_release);
    w.lock.unlock();
}

void ForkHandover::offer_settled() noexcept { wake(watcher().wake_fd.load()); }

void ForkHandover::watch() noexcept {
    Watcher& w = watcher();
    std::vector<ForkOffer> list;
    std::vector<pollfd> fds;
    for (;;) {
        int wake_fd = -1;
        try {
            const std::lock_guard guard(w.lock);
            if (w.offers.empty()) {
                w.running = false;  // the next fork with offers starts another
                return;
            }
            list = w.offers;
            wake_fd = w.wake_fd.load();
            fds.assign(1, pollfd{wake_fd, POLLIN, 0});
            for (const ForkOffer& o : list) fds.push_back({o.parent_fd, POLLIN, 0});
        } catch (...) {
            // Out of memory: give every offer up (the parents keep them).
            const std::lock_guard guard(w.lock);
            for (ForkOffer& o : w.offers) end_socket(std::exchange(o.parent_fd, -1));
            w.offers.clear();
            w.running = false;
            return;
        }
        // An offer the parent kept before this snapshot is settled now: its
        // wake-up may have been read by the pass before, whose snapshot did
        // not hold it yet, and its lingering child would never end it.
        bool settled = false;
        for (const ForkOffer& o : list) {
            if (!Connection::offer_open(o.connection, o.generation) && remove_offer(o.parent_fd)) {
                end_kept_offer(o);
                settled = true;
            }
        }
        if (settled) continue;
        if (::poll(fds.data(), fds.size(), -1) < 0) {
            if (errno != EINTR) std::this_thread::sleep_for(kWatchRetryInterval);
            continue;
        }
        if ((fds[0].revents & POLLNVAL) != 0) {
            // The program closed the wake-up descriptor (a closefrom()):
            // forget it rather than poll it for ever; the next fork with
            // offers makes another, and this loop reads it each pass.
            const std::lock_guard guard(w.lock);
            if (w.wake_fd.load() == wake_fd) w.wake_fd.store(-1);
        }
        const bool woken = (fds[0].revents & POLLIN) != 0;
        if (woken) {
            std::uint64_t count = 0;
            (void)!::read(wake_fd, &count, sizeof count);
        }
        for (std::size_t i = 0; i < list.size(); ++i) {
            const ForkOffer& o = list[i];
            if ((fds[i + 1].revents & POLLNVAL) != 0) {
                // The program closed our end (a closefrom()): forget it, and
                // never close a number that may be another file's by now.
                remove_offer(o.parent_fd);
            } else if ((fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
                if (remove_offer(o.parent_fd)) answer(o);
            } else if (woken && !Connection::offer_open(o.connection, o.generation)) {
                // The parent kept it: the child end sees EOF, a claim is refused.
                if (remove_offer(o.parent_fd)) end_kept_offer(o);
            }
        }
    }
}

// One child end turned readable: a claim, or the child closed it (exec,
// exit) without one. Either way the offer is settled here.
void ForkHandover::answer(const ForkOffer& offer) noexcept {
    int fd = offer.parent_fd;
    char byte = 0;
    if (::recv(fd, &byte, 1, MSG_DONTWAIT) != 1 || byte != kClaim) {
        end_socket(fd);
        return;
    }
    std::unique_ptr<Stream> stream = Connection::give_to_child(offer.connection, offer.generation);
    const char reply = stream ? kGranted : kRefused;
    if (::send(fd, &reply, 1, MSG_NOSIGNAL) != 1 && stream) {
        // The child died between its claim and the answer: the connection
        // goes back to the parent, untouched.
        Connection::take_back(offer.connection, offer.generation, std::move(stream));
        g_relays_running.fetch_sub(1, std::memory_order_acq_rel);
    }
    if (!stream) {
        end_socket(fd);
        return;
    }
    start_relay(std::move(stream), fd);
}

void ForkHandover::start_relay(std::unique_ptr<Stream> stream, int sock) noexcept {
    const auto finished = [] { g_relays_running.fetch_sub(1, std::memory_order_acq_rel); };
    auto* job = new (std::nothrow) std::pair<std::unique_ptr<Stream>, int>(std::move(stream), sock);
    if (job != nullptr && start_quiet_thread([job, finished] {
            const std::unique_ptr<std::pair<std::unique_ptr<Stream>, int>> owned(job);
            relay_stream(std::move(owned->first), owned->second);
            finished();
        }))
        return;
    // The child was told yes: ending its socket ends its session the way a
    // dead peer would, which is all that is left to do.
    if (job != nullptr) {
        try {
            job->first->close();
        } catch (...) {
        }
        delete job;
    }
    end_socket(sock);
    finished();
}

bool ForkHandover::claim(int fd) noexcept {
    const char ask = kClaim;
    if (::send(fd, &ask, 1, MSG_NOSIGNAL) != 1) return false;
    // No time limit, as a read on a socket has none: the watcher answers at
    // once unless the parent is stopped, and a parent that dies closes its
    // end (EOF). A child that gave up after a grant would cost the parent
    // its session.
    char reply = 0;
    for (;;) {
        const ssize_t n = ::recv(fd, &reply, 1, 0);
        if (n < 0 && errno == EINTR) continue;
        return n == 1 && reply == kGranted;
    }
}

void ForkHandover::relay_starting() noexcept { g_relays_running.fetch_add(1, std::memory_order_acq_rel); }

void ForkHandover::wait_for_relays(std::chrono::steady_clock::time_point deadline) noexcept {
    while (g_relays_running.load(std::memory_order_acquire) > 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(kRelayPollInterval);
}

}  // namespace pg_rdma::transport
