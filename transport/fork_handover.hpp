// What becomes of a Connection at fork() (connection.hpp, "Fork").
//
// A queue pair cannot be used from a forked child: the kernel refuses the
// child's verbs calls on the inherited uverbs descriptor (it was opened
// under the parent's credentials) and the registered pages stay the
// parent's. A child that must carry on a session its parent opened
// (pg_basebackup -X stream) gets the bytes through its parent instead:
//
//   prepare (registry locked)   each idle connection gets an AF_UNIX socket
//                               pair and a new fork generation (kOffered)
//   parent after fork           keeps its end; one watcher thread waits for a
//                               claim on each
//   child after fork            keeps its end in the connection
//   first use wins              a call in the parent moves kOffered to kOwned;
//                               the child's adopt_in_child() sends kClaim and
//                               the watcher moves kOffered to kHanded, answers
//                               kGranted and starts a relay (stream_relay.hpp)
//                               that owns the Stream from then on
//
// The generation comes from one counter for the whole process, so an answer
// to an old fork's offer can never match a later offer, even on another
// connection made at the same address.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace pg_rdma::transport {

class Connection;

struct ForkOffer {
    Connection* connection = nullptr;
    std::uint64_t generation = 0;
    int parent_fd = -1;
    int child_fd = -1;
};

class ForkHandover {
public:
    // Connection::fork_state_: generation << kGenerationShift | state.
    static constexpr std::uint64_t kOwned = 0;    // this process's (no fork, or it kept it)
    static constexpr std::uint64_t kOffered = 1;  // forked; the first user keeps it
    static constexpr std::uint64_t kHanded = 2;   // a child took it; a relay carries it
    static constexpr std::uint64_t kStateMask = 3;
    static constexpr unsigned kGenerationShift = 2;

    // Before fork(), with the registry locked: offers `c` when it is this
    // process's and no call is inside it (its in_use_ then stays held until
    // after the fork). False when it is not offered.
    static bool offer(Connection& c, ForkOffer& out) noexcept;
    // Undoes offer() (the offer could not be recorded).
    static void withdraw(ForkOffer& offer) noexcept;
    // After fork(): each side closes the other's end and releases in_use_.
    static void keep_parent_end(ForkOffer& offer) noexcept;
    static void keep_child_end(ForkOffer& offer) noexcept;
    // Parent: a thread answers the claims on these offers and starts a
    // relay for each connection a child takes; it ends when every child
    // end is closed (the child took it, exec'd or exited).
    static void watch(std::vector<ForkOffer> offers) noexcept;
    // Child: asks for the connection over `fd` (its end); true when granted.
    static bool claim(int fd) noexcept;
    // Parent's exit: waits until every relay has finished, or `deadline`.
    static void wait_for_relays(std::chrono::steady_clock::time_point deadline) noexcept;
    // Child after fork: the parent's relays are not its own.
    static void forget_relays_in_child() noexcept;

private:
    static void answer_claims(std::vector<ForkOffer> offers) noexcept;
    static void answer(const ForkOffer& offer) noexcept;
};

}  // namespace pg_rdma::transport
