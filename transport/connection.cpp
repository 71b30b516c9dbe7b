// Connection: the public face of Stream, plus the exit-time drain.
#include "transport/connection.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "transport/stream.hpp"

namespace pg_rdma::transport {
namespace {

// Connections this process owns, for the exit handler. Deliberately leaked:
// it must outlive every static destructor that might run before atexit
// handlers registered later. Connections are single-threaded, but different
// threads may each own some, so the list itself is locked.
struct Registry {
    std::mutex lock;
    std::vector<Connection*> live;
};

Registry& registry() {
    static auto* r = new Registry();
    return *r;
}

void register_connection(Connection* c) {
    static const bool registered = [] { return std::atexit(&Connection::close_all_at_exit) == 0; }();
    (void)registered;
    const std::lock_guard guard(registry().lock);
    registry().live.push_back(c);
}

void unregister_connection(Connection* c) {
    Registry& r = registry();
    const std::lock_guard guard(r.lock);
    r.live.erase(std::remove(r.live.begin(), r.live.end(), c), r.live.end());
}

}  // namespace

Connection::Connection(std::unique_ptr<Stream> stream) : stream_(std::move(stream)), owner_pid_(getpid()) {
    register_connection(this);
}

Connection::~Connection() {
    if (getpid() == owner_pid_) {
        close();
        unregister_connection(this);
    } else {
        // A forked child inherited this object but not the right to use the
        // queue pair: leave the parent's connection alone.
        (void)stream_.release();
    }
}

bool Connection::usable() const { return stream_ != nullptr && getpid() == owner_pid_; }

ssize_t Connection::read(void* buf, std::size_t len) {
    if (!usable()) return errno = EBADF, -1;
    return stream_->read(buf, len);
}

ssize_t Connection::write(const void* buf, std::size_t len) {
    const iovec one{const_cast<void*>(buf), len};
    return writev(&one, 1);
}

ssize_t Connection::writev(const struct iovec* iov, int iovcnt) {
    if (!usable()) return errno = EBADF, -1;
    if (iovcnt < 0) return errno = EINVAL, -1;
    return stream_->writev(iov, iovcnt);
}

int Connection::shutdown(int how) {
    if (!usable()) return errno = EBADF, -1;
    if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) return errno = EINVAL, -1;
    return how == SHUT_RD ? 0 : stream_->shutdown_write();
}

int Connection::close() {
    if (!usable()) return 0;
    const int rc = stream_->close();
    const int saved = errno;
    stream_.reset();  // frees the queue pair and unpins the buffers now
    errno = saved;
    return rc;
}

int Connection::fd() const { return usable() ? stream_->fd() : -1; }

bool Connection::readable() { return !usable() || stream_->readable(); }

ConnectionStats Connection::stats() const { return stream_ ? stream_->stats() : ConnectionStats{}; }

std::string Connection::failure_reason() const { return stream_ ? stream_->failure_reason() : std::string(); }

void Connection::close_all_at_exit() {
    const int saved = errno;
    std::vector<Connection*> live;
    {
        const std::lock_guard guard(registry().lock);
        live = registry().live;
    }
    for (Connection* c : live)
        if (c->usable()) c->close();
    errno = saved;
}

}  // namespace pg_rdma::transport
