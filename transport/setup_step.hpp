// What every resumable setup (Connector, Acceptor, ClientUpgrade,
// ServerUpgrade) has in common: the status a step reports, the descriptors
// it waits on, and the one deadline that bounds the whole setup.
//
// Driving one, in a caller's own event loop:
//
//     while (setup.step(...) == StepStatus::InProgress)
//         poll(setup.want().fds.data(), setup.want().count, ms_until(setup.deadline()));
//
// No step waits for the peer: a step consumes what is ready, starts what
// comes next and returns, in the time a few system calls take (creating the
// verbs resources is the slowest of them; the first setup in a process also
// pays one-time library initialisation, see transport/README.md). A step
// notices the deadline itself, so call it again once poll() times out.
//
// Destroying a setup object at any step cancels it and releases everything
// it holds; that is how a caller abandons a setup (a backend told to exit,
// a client's event loop cancelling a connection attempt).
#pragma once

#include <poll.h>

#include <array>
#include <chrono>

#include "transport/error.hpp"

namespace pg_rdma::transport {

using SetupClock = std::chrono::steady_clock;
using Deadline = SetupClock::time_point;

enum class StepStatus { InProgress, Done, Failed };

// Which end of a connection a setup makes: what a process forked after its
// parent used RDMA can still do differs (cm_events.hpp).
enum class SetupSide { Connecting, Listening };

// The descriptors a setup waits on before its next step, ready for poll().
// Client-side setups always name one, so an application's event loop can
// wait on it alone; the server's upgrade also watches its TCP socket.
struct Want {
    static constexpr std::size_t kMaxFds = 2;
    std::array<pollfd, kMaxFds> fds{};
    nfds_t count = 0;

    static Want none() noexcept { return {}; }
    static Want one(int fd, short events) noexcept {
        Want w;
        w.fds[0] = {fd, events, 0};
        w.count = 1;
        return w;
    }
    // `first` plus one more descriptor (first.count must be below kMaxFds).
    static Want plus(Want first, int fd, short events) noexcept {
        first.fds[first.count] = {fd, events, 0};
        ++first.count;
        return first;
    }
};

// Milliseconds left until `deadline`, rounded up so that a poll() that
// times out wakes at or after the deadline, never just before it; 0 once
// it has passed.
int ms_until(Deadline deadline) noexcept;
[[nodiscard]] inline bool passed(Deadline deadline) noexcept { return SetupClock::now() >= deadline; }

// The blocking wrappers' wait: until something in `want` is ready or the
// deadline has passed (the next step reports the timeout). A signal is no
// reason to stop: EINTR keeps waiting. False only if poll() itself fails.
bool wait_for(const Want& want, Deadline deadline, Error& err) noexcept;

// The blocking wrappers' loop over a Connector or an Acceptor: steps it to
// its end, waiting on its descriptors in between; its connection, or
// nullptr with `err`.
template <class Setup>
auto run_setup_to_end(Setup& setup, Error& err) -> decltype(setup.take_connection()) {
    for (;;) {
        switch (setup.step(err)) {
            case StepStatus::Done: return setup.take_connection();
            case StepStatus::Failed: return nullptr;
            case StepStatus::InProgress: break;
        }
        if (!wait_for(setup.want(), setup.deadline(), err)) return nullptr;
    }
}

// Call only inside a catch block: turns the exception being handled into a
// failure in `err`, ENOMEM for std::bad_alloc and EIO for anything else,
// with `where` in the message. Never throws; public setup calls are
// noexcept and end every body with this.
void fail_from_exception(Error& err, const char* where) noexcept;

}  // namespace pg_rdma::transport
