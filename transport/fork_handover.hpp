// What becomes of a Connection at fork() (connection.hpp, "Fork").
//
// A queue pair cannot be used from a forked child: the kernel refuses the
// child's verbs calls on the inherited uverbs descriptor (it was opened
// under the parent's credentials) and the registered pages stay the
// parent's. A child that must carry on a session its parent opened
// (pg_basebackup -X stream) gets the bytes through its parent instead:
//
//   prepare (registry locked)   each connection no call is inside and with
//                               no offer open gets an AF_UNIX socket pair
//                               and a new fork generation (kOffered)
//   parent after fork           hands its ends to the watcher, one thread per
//                               process that runs while any offer is open
//   child after fork            keeps its end in the connection, and closes
//                               every end inherited from earlier forks
//   first use wins              a call in the parent moves kOffered to kOwned
//                               and wakes the watcher, which closes the offer;
//                               the child's adopt_in_child() sends kClaim and
//                               the watcher moves kOffered to kHanded, answers
//                               kGranted and starts a relay (stream_relay.hpp)
//                               that owns the Stream from then on
//
// The generation comes from one counter for the whole process, so an answer
// to an old fork's offer can never match a later offer, even on another
// connection made at the same address.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

namespace pg_rdma::transport {

class Connection;
class Stream;

struct ForkOffer {
    Connection* connection = nullptr;
    std::uint64_t generation = 0;
    int parent_fd = -1;
    int child_fd = -1;
    // parent_fd's inode: a number the program closed behind the watcher
    // and reused for another file is never shut down or closed by it.
    ino_t parent_ino = 0;
};

class ForkHandover {
public:
    // Connection::fork_state_: generation << kGenerationShift | state.
    static constexpr std::uint64_t kOwned = 0;    // this process's (no fork, or it kept it)
    static constexpr std::uint64_t kOffered = 1;  // forked; the first user keeps it
    static constexpr std::uint64_t kHanded = 2;   // a child took it; a relay carries it
    static constexpr std::uint64_t kStateMask = 3;
    static constexpr unsigned kGenerationShift = 2;

    // fork() handlers (connection.cpp calls them with the registry locked).
    // prepare_fork() also takes the watcher's lock, so neither process
    // inherits it held.
    static void prepare_fork() noexcept;
    // Offers `c` when it is this process's, no call is inside it and no
    // earlier offer of it is open. False when it is not offered.
    static bool offer(Connection& c, ForkOffer& out) noexcept;
    static void withdraw(ForkOffer& offer) noexcept;  // undoes offer()
    static void parent_after_fork(std::vector<ForkOffer>& offers) noexcept;
    static void child_after_fork(std::vector<ForkOffer>& offers, const std::vector<Connection*>& live) noexcept;

    // Parent: a call kept a connection that was offered; the watcher closes
    // that offer so its child end sees EOF and the pair is freed.
    static void offer_settled() noexcept;
    // Child: asks for the connection over `fd` (its end); true when granted.
    static bool claim(int fd) noexcept;
    // Parent's exit: waits until every relay has finished, or `deadline`.
    static void wait_for_relays(std::chrono::steady_clock::time_point deadline) noexcept;
    // Parent, registry locked: a relay is about to start (counted at once,
    // so an exit that races the handover still waits for it).
    static void relay_starting() noexcept;

private:
    static void watch() noexcept;
    static void answer(const ForkOffer& offer) noexcept;
    static void start_relay(std::unique_ptr<Stream> stream, int sock) noexcept;
};

}  // namespace pg_rdma::transport
