// Opening connections with librdmacm: the passive side listens on an IP
// address, the active side resolves, connects and presents a nonce.
//
// Setup comes in resumable steps (connector.hpp, acceptor.hpp, driven as
// setup_step.hpp says) for callers with their own event loop, and as the
// blocking calls below, which run those steps against one deadline. Only
// the returned Connection is used like a non-blocking socket afterwards.
//
// All verbs resources are created here, in the calling process, after any
// fork that led to it: never call this in a process that will fork and hand
// the connection to a child.
//
// Every call is noexcept: failure is nullptr/false with `err` (ENOMEM when
// memory ran out).
#pragma once

#include <sys/socket.h>

#include <memory>

#include "protocol/upgrade.hpp"
#include "transport/acceptor.hpp"
#include "transport/connection.hpp"
#include "transport/connector.hpp"
#include "transport/error.hpp"
#include "transport/settings.hpp"
#include "transport/setup_step.hpp"

struct rdma_event_channel;

namespace pg_rdma::transport {

class CmListener;

// The passive side of one or more connections.
class Listener {
public:
    // Binds `addr` (port 0 picks an ephemeral port) and listens.
    static std::unique_ptr<Listener> create(const sockaddr* addr, const Settings& settings,
                                            Error& err) noexcept;
    ~Listener();
    Listener(const Listener&) = delete;
    Listener& operator=(const Listener&) = delete;

    // The bound address, with the port the kernel chose.
    [[nodiscard]] sockaddr_storage local_address() const noexcept;
    // Readable when a connection request is waiting.
    [[nodiscard]] int fd() const noexcept;
    // Where connection requests arrive (for Acceptor).
    [[nodiscard]] rdma_event_channel* cm_channel() const noexcept;
    [[nodiscard]] const Settings& settings() const noexcept { return settings_; }

    // Blocking: runs an Acceptor until `deadline` (the first form: within
    // connect_timeout from now) for a request whose private data carries
    // `nonce` and, when `expected_peer` is given, comes from that IP
    // address; refuses any other request it sees meanwhile, and negotiates.
    std::unique_ptr<Connection> accept(const protocol::Nonce& nonce, const sockaddr* expected_peer,
                                       Error& err) noexcept;
    std::unique_ptr<Connection> accept(const protocol::Nonce& nonce, const sockaddr* expected_peer,
                                       Deadline deadline, Error& err) noexcept;

private:
    explicit Listener(std::unique_ptr<CmListener> cm, const Settings& settings);
    std::unique_ptr<CmListener> cm_;
    Settings settings_;
};

// Blocking active side: runs a Connector (no source address) until
// connect_timeout from now.
std::unique_ptr<Connection> connect(const sockaddr* dst, const protocol::Nonce& nonce,
                                    const Settings& settings, Error& err) noexcept;

// Cheap checks before asking a peer for RDMA: is there an RDMA device at all,
// may this process pin what `settings` needs (RLIMIT_MEMLOCK), and, for a
// listening side, was it not forked after its parent used RDMA (cm_events.hpp,
// rdma_setup_possible)?
bool rdma_usable(const Settings& settings, SetupSide side, Error& err) noexcept;

// librdmacm and libibverbs are linked into most programs that use this
// library. One that loads them itself on first use (libpq_rdma.so:
// libclient/preload/rdma_libraries.hpp) installs, before any setup, the
// function that does so: it returns nullptr once they are there, or why
// they are not. rdma_usable() calls it before anything touches them and
// fails with that reason (ELIBACC).
using RdmaLibraryLoader = const char* (*)() noexcept;
void install_rdma_library_loader(RdmaLibraryLoader loader) noexcept;

}  // namespace pg_rdma::transport
