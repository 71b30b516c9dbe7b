#include "transport/stream_relay.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "transport/stream.hpp"

namespace pg_rdma::transport {
namespace {

// Bytes in flight each way inside the relay: a COPY chunk or a WAL message
// of libpq's usual sizes fits at once.
constexpr std::size_t kRelayChunkBytes = 64 * 1024;

// Bytes read from one side and not yet written to the other.
struct Pending {
    std::vector<std::uint8_t> bytes = std::vector<std::uint8_t>(kRelayChunkBytes);
    std::size_t begin = 0;
    std::size_t end = 0;
    [[nodiscard]] bool empty() const { return begin == end; }
    void filled(std::size_t n) { begin = 0, end = n; }
    void consumed(std::size_t n) {
        begin += n;
        if (begin == end) begin = end = 0;
    }
};

bool transient(int error) { return error == EAGAIN || error == EWOULDBLOCK || error == EINTR; }

// The two directions end separately, as a TCP connection's do: the child
// shutting down its side (or exiting) becomes a Close after its last byte,
// and the server's EOF or failure reaches the child after every byte that
// arrived before it, so a FATAL sent just before a backend ends is read.
class Relay {
public:
    Relay(Stream& stream, int sock) : stream_(stream), sock_(sock) {}

    // Moves what can move now; false once both directions are over.
    bool step() {
        moved_ = false;
        child_to_stream();
        stream_to_child();
        return !(up_over() && down_over());
    }
    [[nodiscard]] bool moved() const { return moved_; }
    [[nodiscard]] bool failed() const { return up_failed_ || stream_failed_; }

    // Sleeps until either side can move something.
    void sleep() {
        const short stream_wants = static_cast<short>((down_open() && down_.empty() ? POLLIN : 0) |
                                                      (!up_failed_ && !up_.empty() ? POLLOUT : 0));
        const short child_wants = static_cast<short>((up_open() && up_.empty() ? POLLIN : 0) |
                                                     (!child_gone_ && !down_.empty() ? POLLOUT : 0));
        pollfd fds[2] = {{-1, POLLIN, 0}, {child_wants != 0 ? sock_ : -1, child_wants, 0}};
        if (stream_wants != 0) {
            // Also takes the stream's internal events (completions, ticks).
            if ((stream_.poll_events(stream_wants) & stream_wants) != 0) return;
            stream_.set_interest(stream_wants);
            fds[0].fd = stream_.fd();
        }
        (void)::poll(fds, 2, -1);
    }

private:
    [[nodiscard]] bool up_open() const { return !child_eof_ && !up_failed_; }
    [[nodiscard]] bool down_open() const { return !stream_eof_ && !stream_failed_ && !child_gone_; }
    // Child -> stream is over once the child's end reached the server as a
    // Close (or could not); stream -> child once the child has every byte
    // and its EOF (or is gone).
    [[nodiscard]] bool up_over() const { return up_failed_ || (child_eof_ && up_.empty() && close_sent_); }
    [[nodiscard]] bool down_over() const { return child_gone_ || (!down_open() && down_.empty()); }

    void child_to_stream() {
        if (up_open() && up_.empty()) {
            const ssize_t n = ::recv(sock_, up_.bytes.data(), up_.bytes.size(), MSG_DONTWAIT);
            if (n > 0) {
                up_.filled(static_cast<std::size_t>(n));
                moved_ = true;
            } else if (n == 0 || !transient(errno)) {
                child_eof_ = true;  // shut down its side, exited, or vanished
                moved_ = true;
            }
        }
        if (!up_failed_ && !up_.empty()) {
            const iovec v{up_.bytes.data() + up_.begin, up_.end - up_.begin};
            const ssize_t n = stream_.writev(&v, 1);
            if (n > 0) {
                up_.consumed(static_cast<std::size_t>(n));
                moved_ = true;
            } else if (n < 0 && !transient(errno)) {
                up_failed_ = true;  // the server went; what it sent is still read below
                up_.consumed(up_.end - up_.begin);
                moved_ = true;
            }
        }
        if (child_eof_ && up_.empty() && !up_failed_ && !close_sent_) {
            close_sent_ = true;  // after the child's last byte, as its own close would
            if (stream_.shutdown_write() < 0) up_failed_ = true;
            moved_ = true;
        }
    }

    void stream_to_child() {
        if (down_open() && down_.empty()) {
            const ssize_t n = stream_.read(down_.bytes.data(), down_.bytes.size());
            if (n > 0) {
                down_.filled(static_cast<std::size_t>(n));
                moved_ = true;
            } else if (n == 0) {
                stream_eof_ = true;
                moved_ = true;
            } else if (!transient(errno)) {
                stream_failed_ = true;
                moved_ = true;
            }
        }
        if (!child_gone_ && !down_.empty()) {
            const ssize_t n = ::send(sock_, down_.bytes.data() + down_.begin, down_.end - down_.begin,
                                     MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n > 0) {
                down_.consumed(static_cast<std::size_t>(n));
                moved_ = true;
            } else if (n < 0 && !transient(errno)) {
                child_gone_ = true;  // closed its end: nobody left to read the rest
                down_.consumed(down_.end - down_.begin);
                moved_ = true;
            }
        }
        if (!down_open() && down_.empty() && !child_gone_ && !eof_sent_) {
            eof_sent_ = true;
            (void)::shutdown(sock_, SHUT_WR);  // the child reads EOF after the last byte
        }
    }

    Stream& stream_;
    int sock_;
    Pending up_;    // child -> stream
    Pending down_;  // stream -> child
    bool child_eof_ = false;      // the child will send nothing more
    bool close_sent_ = false;     // ... and the stream's Close followed its last byte
    bool up_failed_ = false;      // the stream refused a write
    bool stream_eof_ = false;     // the server closed
    bool stream_failed_ = false;  // the stream failed (reset, timeout, protocol)
    bool eof_sent_ = false;       // the child was told
    bool child_gone_ = false;     // the child cannot be written to any more
    bool moved_ = false;
};

}  // namespace

void relay_stream(std::unique_ptr<Stream> stream, int sock) noexcept {
    try {
        Relay relay(*stream, sock);
        while (relay.step())
            if (!relay.moved()) relay.sleep();
        // Both ways are over: wait, as close() does, until the peer's device
        // acknowledged the child's last bytes and the Close. After a failure
        // there is nothing left to confirm.
        if (!relay.failed()) (void)stream->close();
    } catch (...) {
        // Out of memory: dropping the stream below disconnects it.
    }
    try {
        stream.reset();
    } catch (...) {
    }
    // shutdown first: a child of a later fork may hold a copy of this end,
    // and close() alone would then not end the session for our child.
    (void)::shutdown(sock, SHUT_RDWR);
    ::close(sock);
}

}  // namespace pg_rdma::transport
