// Connection: the public face of Stream (noexcept, re-entrance guard, fork
// awareness), plus the exit-time drain.
#include "transport/connection.hpp"

#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "transport/fork_handover.hpp"
#include "transport/stream.hpp"

namespace pg_rdma::transport {
namespace {

// How a destructor waits for a call another thread is inside.
constexpr Millis kDestructorGraceMs{100};
constexpr Millis kDestructorRetryMs{1};
// How long the exit handler waits for relays to forked children: a child
// that exited just before has its last bytes drained within the default
// close_drain_timeout; a child still streaming loses its session.
constexpr Millis kRelayExitWait = Settings{}.close_drain_timeout;

// Connections this process owns, for the exit handler. Deliberately leaked:
// it must outlive every static destructor that might run before atexit
// handlers registered later. Different threads may own connections, so the
// list is locked; fork() takes the lock around itself (pthread_atfork), so a
// child never inherits it held by a thread that does not exist there.
struct Registry {
    std::mutex lock;
    std::vector<Connection*> live;
    // Made by prepare_fork(), closed on one side by each process after it.
    std::vector<ForkOffer> offers_in_fork;
};

void prepare_fork();
void parent_after_fork();
void child_after_fork();

Registry& registry() {
    static Registry* r = [] {
        auto* made = new Registry();
        pthread_atfork(&prepare_fork, &parent_after_fork, &child_after_fork);
        return made;
    }();
    return *r;
}

// Returns false when the connection could not be recorded (no memory): the
// caller then has no exit drain for it, which is worth failing setup over.
bool register_connection(Connection* c) noexcept {
    static const bool registered = [] { return std::atexit(&Connection::close_all_at_exit) == 0; }();
    (void)registered;
    try {
        const std::lock_guard guard(registry().lock);
        registry().live.push_back(c);
        return true;
    } catch (...) {
        return false;
    }
}

void unregister_connection(Connection* c) noexcept {
    Registry& r = registry();
    const std::lock_guard guard(r.lock);
    r.live.erase(std::remove(r.live.begin(), r.live.end(), c), r.live.end());
}

// This process's id without a system call per use (glibc no longer caches
// getpid): every Connection call compares it with the owner's. Refreshed
// in a forked child before any of the child's code runs.
std::atomic<pid_t> g_pid{0};

void refresh_pid() { g_pid.store(getpid(), std::memory_order_relaxed); }

[[gnu::noinline, gnu::cold]] pid_t first_pid() noexcept {
    refresh_pid();
    return g_pid.load(std::memory_order_relaxed);
}

inline pid_t current_pid() noexcept {
    // Refreshed by child_after_fork(), registered with the registry; 0
    // only before the first call (a static initializer's, perhaps): no
    // guard variable to check on every call.
    const pid_t pid = g_pid.load(std::memory_order_relaxed);
    return pid != 0 ? pid : first_pid();
}

// Before fork(): every connection no call is inside is offered to the
// processes on both sides (connection.hpp, Fork), over a socket pair made
// now. A connection that cannot get a pair stays the parent's.
void prepare_fork() {
    Registry& r = registry();
    r.lock.lock();
    ForkHandover::prepare_fork();
    r.offers_in_fork.clear();
    for (Connection* c : r.live) {
        ForkOffer offer;
        if (ForkHandover::offer(*c, offer)) {
            try {
                r.offers_in_fork.push_back(offer);
            } catch (...) {
                ForkHandover::withdraw(offer);
            }
        }
    }
}

void parent_after_fork() {
    Registry& r = registry();
    ForkHandover::parent_after_fork(r.offers_in_fork);
    r.offers_in_fork.clear();
    r.lock.unlock();
}

void child_after_fork() {
    refresh_pid();
    Registry& r = registry();
    ForkHandover::child_after_fork(r.offers_in_fork, r.live);
    r.offers_in_fork.clear();
    r.lock.unlock();
}

// Both made when the library is loaded, before the program can have threads:
// created lazily, a fork could copy another thread's half-done static
// initialisation (its guard held) into the child, which would then hang on
// first use, and a fork before the first use would run without the hooks.
[[maybe_unused]] const bool g_process_state_ready = (registry(), current_pid(), true);

// Maps whatever escaped to errno: no exception leaves a Connection call.
int errno_for_current_exception() noexcept {
    try {
        throw;
    } catch (const std::bad_alloc&) {
        return ENOMEM;
    } catch (...) {
        return EIO;
    }
}

}  // namespace

bool Connection::usable() const noexcept { return stream_ != nullptr && current_pid() == owner_pid_; }

// Inline into every call's claim: as two calls they cost more than their
// checks, four claims a message (perf/FINDINGS-archive.md, "The instruction count
// over time").
[[gnu::always_inline]] inline bool Connection::claimable() noexcept {
    if (stream_ == nullptr || current_pid() != owner_pid_) return false;
    // In the parent after a fork: kept from the offer, unless a child took it.
    const std::uint64_t state = fork_state_.load(std::memory_order_acquire);
    return (state & ForkHandover::kStateMask) == ForkHandover::kOwned || keep_offered(state);
}

// One call's claim on the connection (see in_use_). In the parent after a
// fork, the first call also keeps the connection from the fork's offer.
class Connection::Use {
public:
    explicit Use(Connection& c) noexcept : c_(c), held_(c.in_use_.try_lock() || c.wait_out_fork_offer()) {
        if (!held_) {
            errno = c.made_in_this_process() ? EIO : EBADF;
            return;
        }
        // Checked under in_use_: a child's claim takes the stream under it.
        if (!c.claimable()) {
            c.in_use_.unlock();
            held_ = false;
            errno = EBADF;
        }
    }
    ~Use() {
        if (held_) c_.in_use_.unlock();
    }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;
    explicit operator bool() const noexcept { return held_; }

private:
    Connection& c_;
    bool held_;
};

Connection::Connection(std::unique_ptr<Stream> stream) noexcept
    : stream_(std::move(stream)), owner_pid_(current_pid()), fd_(stream_ ? stream_->fd() : -1) {
    // Without a registry entry there would be no exit drain for it: better
    // an unusable connection (every call EBADF) than silently lost bytes.
    if (!register_connection(this)) {
        stream_.reset();
        fd_.store(-1, std::memory_order_relaxed);
    }
}

Connection::~Connection() {
    // First, so that neither the exit drain nor a fork's watcher can find
    // it from here on (a watcher that already took the stream left null).
    unregister_connection(this);
    // An open offer of it is void now: the watcher closes it.
    if ((fork_state_.load(std::memory_order_acquire) & ForkHandover::kStateMask) == ForkHandover::kOffered)
        ForkHandover::offer_settled();
    if (current_pid() == owner_pid_) {
        // Wait, bounded, for a call another thread is inside (or the exit
        // drain holding it) to end. If it does not, leave the stream to the
        // kernel rather than pull it from under that call (or deadlock on a
        // call this very thread was interrupted in).
        const auto give_up = std::chrono::steady_clock::now() +
                             (stream_ ? stream_->close_drain_timeout() : Millis{0}) + kDestructorGraceMs;
        bool held = in_use_.try_lock();
        while (!held && std::chrono::steady_clock::now() < give_up) {
            std::this_thread::sleep_for(kDestructorRetryMs);
            held = in_use_.try_lock();
        }
        if (held) {
            if (stream_) {
                try {
                    stream_->close();
                } catch (...) {
                }
                stream_.reset();
            }
            in_use_.unlock();
        } else {
            (void)stream_.release();
        }
    } else {
        // A forked child inherited this object but not the right to use the
        // queue pair: destroying it through the shared verbs descriptor
        // would tear down the parent's. Leave it be.
        (void)stream_.release();
        forget_offer();  // claims nothing: the parent keeps it
    }
}

bool Connection::made_in_this_process() const noexcept { return current_pid() == owner_pid_; }

bool Connection::keep_offered(std::uint64_t state) noexcept {
    while ((state & ForkHandover::kStateMask) == ForkHandover::kOffered) {
        if (fork_state_.compare_exchange_weak(state, (state & ~ForkHandover::kStateMask) | ForkHandover::kOwned,
                                              std::memory_order_acq_rel)) {
            ForkHandover::offer_settled();
            return true;
        }
    }
    return (state & ForkHandover::kStateMask) == ForkHandover::kOwned;
}

bool Connection::wait_out_fork_offer() noexcept {
    // in_use_ was found held. The offer holds it for one socketpair() call,
    // its thread perhaps descheduled meanwhile, so no time limit; but it may
    // also have ended between that try and now, so try again until a try
    // fails with no offer begun or ended around it: then a call holds it.
    // The fences order the claim's acquire-only exchange against the
    // counter, as offer() does on its side.
    for (;;) {
        std::atomic_thread_fence(std::memory_order_seq_cst);
        const std::uint32_t seq = offer_seq_.load(std::memory_order_seq_cst);
        if (seq % 2 != 0) {
            // A signal handler inside this thread's own offer would wait
            // for itself.
            if (offering_.load(std::memory_order_acquire) == ::gettid()) return false;
            while (offer_seq_.load(std::memory_order_seq_cst) == seq) std::this_thread::yield();
            continue;
        }
        if (in_use_.try_lock()) return true;
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (offer_seq_.load(std::memory_order_seq_cst) == seq) return false;
    }
}

bool Connection::handed_to_child() const noexcept {
    return made_in_this_process() &&
           (fork_state_.load(std::memory_order_acquire) & ForkHandover::kStateMask) == ForkHandover::kHanded;
}

std::unique_ptr<Stream> Connection::give_to_child(Connection* c, std::uint64_t generation) noexcept {
    Registry& r = registry();
    const std::lock_guard guard(r.lock);
    // Destroyed since the fork (the destructor unregisters first): refuse.
    if (std::find(r.live.begin(), r.live.end(), c) == r.live.end()) return nullptr;
    std::uint64_t expected = generation << ForkHandover::kGenerationShift | ForkHandover::kOffered;
    if (!c->fork_state_.compare_exchange_strong(
            expected, generation << ForkHandover::kGenerationShift | ForkHandover::kHanded, std::memory_order_acq_rel))
        return nullptr;  // the parent used it first, or a later fork offered it again
    // A call that began before the claim sees kHanded, fails and lets go.
    const std::lock_guard use(c->in_use_);
    c->fd_.store(-1, std::memory_order_release);
    ForkHandover::relay_starting();
    return std::move(c->stream_);
}

bool Connection::offer_open(Connection* c, std::uint64_t generation) noexcept {
    Registry& r = registry();
    const std::lock_guard guard(r.lock);
    return std::find(r.live.begin(), r.live.end(), c) != r.live.end() &&
           c->fork_state_.load(std::memory_order_acquire) ==
               (generation << ForkHandover::kGenerationShift | ForkHandover::kOffered);
}

void Connection::take_back(Connection* c, std::uint64_t generation, std::unique_ptr<Stream> stream) noexcept {
    Registry& r = registry();
    const std::lock_guard guard(r.lock);
    if (std::find(r.live.begin(), r.live.end(), c) == r.live.end()) return;  // gone: the stream closes here
    const std::lock_guard use(c->in_use_);
    c->fd_.store(stream->fd(), std::memory_order_release);
    c->stream_ = std::move(stream);
    c->fork_state_.store(generation << ForkHandover::kGenerationShift | ForkHandover::kOwned,
                         std::memory_order_release);
}

namespace {
ino_t inode_of(int fd) noexcept {
    struct stat st {};
    return ::fstat(fd, &st) == 0 ? st.st_ino : 0;
}
}  // namespace

void Connection::keep_offer(int fd) noexcept {
    forget_offer();
    child_offer_fd_ = fd;
    child_offer_ino_ = inode_of(fd);
}

void Connection::forget_offer() noexcept {
    const int fd = std::exchange(child_offer_fd_, -1);
    if (fd >= 0 && child_offer_ino_ != 0 && inode_of(fd) == child_offer_ino_) ::close(fd);
}

int Connection::adopt_in_child() noexcept {
    if (made_in_this_process()) return errno = EINVAL, -1;
    const int fd = std::exchange(child_offer_fd_, -1);
    // The program may have closed the number and reused it since the fork.
    if (fd < 0 || child_offer_ino_ == 0 || inode_of(fd) != child_offer_ino_) return errno = EBADF, -1;
    if (ForkHandover::claim(fd)) return fd;
    ::close(fd);
    return errno = EBADF, -1;
}

ssize_t Connection::read(void* buf, std::size_t len) noexcept {
    const Use use(*this);
    if (!use) return -1;
    try {
        return stream_->read(buf, len);
    } catch (...) {
        return errno = errno_for_current_exception(), -1;
    }
}

ssize_t Connection::write(const void* buf, std::size_t len) noexcept {
    const iovec one{const_cast<void*>(buf), len};
    return writev(&one, 1);
}

ssize_t Connection::writev(const struct iovec* iov, int iovcnt) noexcept {
    if (iovcnt < 0 || iovcnt > IOV_MAX) return errno = EINVAL, -1;
    const Use use(*this);
    if (!use) return -1;
    try {
        return stream_->writev(iov, iovcnt);
    } catch (...) {
        return errno = errno_for_current_exception(), -1;
    }
}

ssize_t Connection::send(const void* buf, std::size_t len, int flags) noexcept {
    if ((flags & ~(MSG_MORE | MSG_DONTWAIT | MSG_NOSIGNAL)) != 0) return errno = EOPNOTSUPP, -1;
    const Use use(*this);
    if (!use) return -1;
    try {
        const iovec one{const_cast<void*>(buf), len};
        return stream_->writev(&one, 1, (flags & MSG_MORE) != 0);
    } catch (...) {
        return errno = errno_for_current_exception(), -1;
    }
}

int Connection::flush() noexcept {
    const Use use(*this);
    if (!use) return -1;
    try {
        const int error = stream_->flush();
        return error == 0 ? 0 : (errno = error, -1);
    } catch (...) {
        return errno = errno_for_current_exception(), -1;
    }
}

int Connection::shutdown(int how) noexcept {
    if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) return errno = EINVAL, -1;
    const Use use(*this);
    if (!use) return -1;
    try {
        return how == SHUT_RD ? 0 : stream_->shutdown_write();
    } catch (...) {
        return errno = errno_for_current_exception(), -1;
    }
}

int Connection::close() noexcept {
    if (handed_to_child()) return 0;  // the child's now; its relay closes the stream
    const Use use(*this);
    if (!use) return -1;
    int rc = 0;
    try {
        rc = stream_->close();
    } catch (...) {
        errno = errno_for_current_exception();
        rc = -1;
    }
    const int saved = errno;
    fd_.store(-1, std::memory_order_release);
    stream_.reset();  // frees the queue pair and unpins the buffers now
    errno = saved;
    return rc;
}

int Connection::fd() const noexcept { return made_in_this_process() ? fd_.load(std::memory_order_acquire) : -1; }

short Connection::poll_events(short wanted) noexcept {
    const Use use(*this);
    if (!use) return errno == EBADF ? POLLNVAL : 0;
    try {
        return stream_->poll_events(wanted);
    } catch (...) {
        return POLLERR;
    }
}

short Connection::events_now(short wanted) noexcept {
    const Use use(*this);
    if (!use) return errno == EBADF ? POLLNVAL : 0;
    try {
        return stream_->events_now(wanted);
    } catch (...) {
        return POLLERR;
    }
}

int Connection::wait(short wanted, int timeout_ms) noexcept {
    const Use use(*this);
    if (!use) return -1;
    try {
        return stream_->wait(wanted, Millis{timeout_ms});
    } catch (...) {
        return errno = errno_for_current_exception(), -1;
    }
}

short Connection::spin(short wanted) noexcept {
    const Use use(*this);
    if (!use) return errno == EBADF ? POLLNVAL : 0;
    try {
        return stream_->spin(wanted);
    } catch (...) {
        return POLLERR;
    }
}

std::string Connection::device_name() const noexcept {
    try {
        // A question that keeps nothing: it must not touch a stream that a
        // child's claim has moved away.
        return usable() && !handed_to_child() ? stream_->device_name() : std::string();
    } catch (...) {
        return {};
    }
}

int Connection::set_interest(short events) noexcept {
    const Use use(*this);
    if (!use) return -1;
    try {
        stream_->set_interest(events);
    } catch (...) {
        return errno = errno_for_current_exception(), -1;
    }
    return 0;
}

int Connection::attach_tcp(int tcp_fd) noexcept {
    const Use use(*this);
    if (!use) return -1;
    return stream_->attach_tcp(tcp_fd) ? 0 : -1;
}

std::string Connection::failover_reason() const noexcept {
    try {
        return stream_ && stream_->failed_over() ? stream_->failover_reason() : std::string();
    } catch (...) {
        return {};
    }
}

ConnectionStats Connection::stats() const noexcept { return stream_ ? stream_->stats() : ConnectionStats{}; }

std::size_t Connection::unread_bytes() const noexcept { return stream_ ? stream_->unread() : 0; }

std::size_t Connection::readable_bytes() noexcept {
    const Use use(*this);
    if (!use) return 0;
    try {
        (void)stream_->poll_events(POLLIN);
        return stream_->unread();
    } catch (...) {
        return 0;
    }
}

std::string Connection::failure_reason() const noexcept {
    try {
        return stream_ ? stream_->failure_reason() : std::string();
    } catch (...) {
        return {};
    }
}

void Connection::close_all_at_exit() noexcept {
    const int saved = errno;
    try {
        // Claim every connection of ours that no other thread is inside.
        std::vector<Connection*> claimed;
        {
            Registry& r = registry();
            const std::lock_guard guard(r.lock);
            claimed.reserve(r.live.size());
            for (Connection* c : r.live) {
                if (!c->in_use_.try_lock()) continue;
                // Kept from a fork's offer first: no child may take it now.
                if (c->claimable())
                    claimed.push_back(c);
                else
                    c->in_use_.unlock();
            }
        }
        // Drain them all at once: queue every Close, then wait on all their
        // descriptors together until each is acknowledged or one deadline.
        Millis budget{0};
        for (Connection* c : claimed) {
            c->stream_->begin_close();
            budget = std::max(budget, c->stream_->close_drain_timeout());
        }
        const auto deadline = std::chrono::steady_clock::now() + budget;
        std::vector<Connection*> pending = claimed;
        std::vector<pollfd> fds;
        for (;;) {
            std::erase_if(pending, [](Connection* c) { return c->stream_->drain_done(); });
            const auto left = std::chrono::ceil<Millis>(deadline - std::chrono::steady_clock::now());
            if (pending.empty() || left.count() <= 0) break;
            fds.clear();
            for (Connection* c : pending) fds.push_back({c->stream_->fd(), POLLIN, 0});
            if (::poll(fds.data(), fds.size(), static_cast<int>(left.count())) < 0 && errno != EINTR) break;
        }
        for (Connection* c : claimed) {
            c->stream_->end_close();
            c->in_use_.unlock();
        }
        // The relays for children that took a connection finish the last
        // bytes of a child that exited just before us.
        ForkHandover::wait_for_relays(std::chrono::steady_clock::now() + kRelayExitWait);
    } catch (...) {
        // Out of memory at exit: the kernel still tears the queue pairs down.
    }
    errno = saved;
}

}  // namespace pg_rdma::transport
