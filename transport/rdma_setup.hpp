// Opening connections with librdmacm: the passive side listens on an IP
// address, the active side resolves, connects and presents a nonce.
//
// Setup is blocking with a deadline (Settings::connect_timeout): it runs
// once per session, and both PostgreSQL's authentication_timeout and libpq's
// connect_timeout bound it from above. Only the returned Connection is
// non-blocking.
//
// All verbs resources are created here, in the calling process, after any
// fork that led to it: never call this in a process that will fork and hand
// the connection to a child.
#pragma once

#include <sys/socket.h>

#include <memory>

#include "protocol/upgrade.hpp"
#include "transport/connection.hpp"
#include "transport/error.hpp"
#include "transport/settings.hpp"

namespace pg_rdma::transport {

class CmListener;

// The passive side of one or more connections.
class Listener {
public:
    // Binds `addr` (port 0 picks an ephemeral port) and listens.
    static std::unique_ptr<Listener> create(const sockaddr* addr, const Settings& settings,
                                            Error& err);
    ~Listener();
    Listener(const Listener&) = delete;
    Listener& operator=(const Listener&) = delete;

    // The bound address, with the port the kernel chose.
    [[nodiscard]] sockaddr_storage local_address() const;
    // Readable when a connection request is waiting.
    [[nodiscard]] int fd() const;

    // Waits (up to connect_timeout) for a request whose private data carries
    // `nonce` and, when `expected_peer` is given, comes from that IP address;
    // rejects any other request it sees meanwhile, and negotiates.
    std::unique_ptr<Connection> accept(const protocol::Nonce& nonce, const sockaddr* expected_peer,
                                       Error& err);

private:
    explicit Listener(std::unique_ptr<CmListener> cm, const Settings& settings);
    std::unique_ptr<CmListener> cm_;
    Settings settings_;
};

// Active side: resolves `dst`, connects presenting `nonce`, negotiates.
std::unique_ptr<Connection> connect(const sockaddr* dst, const protocol::Nonce& nonce,
                                    const Settings& settings, Error& err);

// Cheap checks before asking a peer for RDMA: is there an RDMA device at all,
// and may this process pin what `settings` needs (RLIMIT_MEMLOCK)?
bool rdma_usable(const Settings& settings, Error& err);

}  // namespace pg_rdma::transport
