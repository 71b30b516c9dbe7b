#include "transport/fork_handover.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
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
// How long a child waits for its parent's answer. The watcher thread does
// nothing else, so it answers at once unless the parent is stopped.
constexpr std::chrono::milliseconds kClaimAnswerTimeout{10'000};

std::atomic<std::uint64_t> g_fork_generation{0};

// Relays running in this process, for the exit wait. A bare counter, not a
// lock: the exit handler also runs in forked children, which must never
// find a lock held by a thread that does not exist there.
std::atomic<int> g_relays_running{0};
// How often the exit handler looks at it.
constexpr std::chrono::milliseconds kRelayPollInterval{5};

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

}  // namespace

bool ForkHandover::offer(Connection& c, ForkOffer& out) noexcept {
    if (!c.in_use_.try_lock()) return false;  // a call is inside: it stays the parent's
    std::uint64_t state = c.fork_state_.load(std::memory_order_acquire);
    int pair[2] = {-1, -1};
    if (!c.usable() || (state & kStateMask) == kHanded ||
        ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
        c.in_use_.unlock();
        return false;
    }
    const std::uint64_t generation = g_fork_generation.fetch_add(1, std::memory_order_relaxed) + 1;
    // Calls are kept out by in_use_, and a watcher changes the state only
    // under the registry lock, which the caller holds: nothing can race.
    c.fork_state_.store(generation << kGenerationShift | kOffered, std::memory_order_release);
    out = ForkOffer{&c, generation, pair[0], pair[1]};
    return true;
}

void ForkHandover::withdraw(ForkOffer& offer) noexcept {
    close_quietly(offer.parent_fd);
    close_quietly(offer.child_fd);
    offer.connection->in_use_.unlock();  // still kOffered: the next call keeps it
}

void ForkHandover::keep_parent_end(ForkOffer& offer) noexcept {
    close_quietly(offer.child_fd);
    offer.connection->in_use_.unlock();
}

void ForkHandover::keep_child_end(ForkOffer& offer) noexcept {
    close_quietly(offer.parent_fd);
    Connection& c = *offer.connection;
    close_quietly(c.child_offer_fd_);  // a grandchild: its parent's offer is not its own
    c.child_offer_fd_ = std::exchange(offer.child_fd, -1);
    c.in_use_.unlock();
}

void ForkHandover::watch(std::vector<ForkOffer> offers) noexcept {
    // Moving a vector does not allocate; the thread takes the heap copy.
    auto* list = new (std::nothrow) std::vector<ForkOffer>(std::move(offers));
    if (list != nullptr && start_quiet_thread([list] {
            const std::unique_ptr<std::vector<ForkOffer>> owned(list);
            answer_claims(std::move(*owned));
        }))
        return;
    // No watcher: every child end sees EOF, so a claim is refused and the
    // parent keeps its connections.
    for (ForkOffer& o : list != nullptr ? *list : offers) close_quietly(o.parent_fd);
    delete list;
}

void ForkHandover::answer_claims(std::vector<ForkOffer> offers) noexcept {
    std::vector<pollfd> fds;
    try {
        while (!offers.empty()) {
            fds.clear();
            for (const ForkOffer& o : offers) fds.push_back({o.parent_fd, POLLIN, 0});
            if (::poll(fds.data(), fds.size(), -1) < 0) {
                if (errno == EINTR) continue;
                break;
            }
            for (std::size_t i = fds.size(); i-- > 0;) {
                if (fds[i].revents == 0) continue;
                answer(offers[i]);
                offers.erase(offers.begin() + static_cast<std::ptrdiff_t>(i));
            }
        }
    } catch (...) {
    }
    for (ForkOffer& o : offers) close_quietly(o.parent_fd);
}

// One child end turned readable: a claim, or the child closed it (exec,
// exit) without one. Either way the offer is settled here.
void ForkHandover::answer(const ForkOffer& offer) noexcept {
    int fd = offer.parent_fd;
    char byte = 0;
    if (::recv(fd, &byte, 1, MSG_DONTWAIT) != 1 || byte != kClaim) {
        close_quietly(fd);
        return;
    }
    std::unique_ptr<Stream> stream = Connection::give_to_child(offer.connection, offer.generation);
    const char reply = stream ? kGranted : kRefused;
    if (::send(fd, &reply, 1, MSG_NOSIGNAL) != 1 || !stream) {
        close_quietly(fd);
        if (stream) {  // the child vanished right after asking
            try {
                stream->close();
            } catch (...) {
            }
        }
        return;
    }
    g_relays_running.fetch_add(1, std::memory_order_acq_rel);
    auto* job = new (std::nothrow) std::pair<std::unique_ptr<Stream>, int>(std::move(stream), fd);
    const auto finished = [] { g_relays_running.fetch_sub(1, std::memory_order_acq_rel); };
    if (job == nullptr || !start_quiet_thread([job, finished] {
            relay_stream(std::move(job->first), job->second);
            delete job;
            finished();
        })) {
        // The child was told yes; closing its socket ends its session the
        // way a dead peer would, which is all that is left to do.
        if (job != nullptr) {
            try {
                job->first->close();
            } catch (...) {
            }
            ::close(job->second);
            delete job;
        } else {
            close_quietly(fd);
        }
        finished();
    }
}

bool ForkHandover::claim(int fd) noexcept {
    const char ask = kClaim;
    if (::send(fd, &ask, 1, MSG_NOSIGNAL) != 1) return false;
    const auto deadline = std::chrono::steady_clock::now() + kClaimAnswerTimeout;
    for (;;) {
        const auto left =
            std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) return false;
        pollfd p{fd, POLLIN, 0};
        const int ready = ::poll(&p, 1, static_cast<int>(left));
        if (ready < 0 && errno == EINTR) continue;
        if (ready != 1) return false;
        char reply = 0;
        return ::recv(fd, &reply, 1, 0) == 1 && reply == kGranted;
    }
}

void ForkHandover::wait_for_relays(std::chrono::steady_clock::time_point deadline) noexcept {
    while (g_relays_running.load(std::memory_order_acquire) > 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(kRelayPollInterval);
}

void ForkHandover::forget_relays_in_child() noexcept { g_relays_running.store(0, std::memory_order_release); }

}  // namespace pg_rdma::transport
