#include "transport/stream_relay.hpp"

#include <fcntl.h>
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

class Relay {
public:
    Relay(Stream& stream, int sock) : stream_(stream), sock_(sock) {}

    // Moves what can move now; false once the relay is over.
    bool step() {
        moved_ = false;
        child_to_stream();
        stream_to_child();
        return !(stream_failed_ || (child_done_ && up_.empty()));
    }
    [[nodiscard]] bool moved() const { return moved_; }
    // Sleeps until either side can move something.
    void sleep() {
        const short stream_wants = static_cast<short>((!stream_eof_ && down_.empty() ? POLLIN : 0) |
                                                      (!up_.empty() ? POLLOUT : 0));
        const short ready = stream_.poll_events(stream_wants);
        if ((ready & stream_wants) != 0) return;
        // An ended or failed stream stays ready for ever: once its EOF or
        // error is taken (or cannot be, while the child is slow to read),
        // wait on the child alone.
        const bool stream_over = (ready & (POLLERR | POLLHUP)) != 0;
        if (stream_over && !stream_eof_ && down_.empty()) return;  // read() will report it
        stream_.set_interest(stream_wants);
        const short child_wants = static_cast<short>((!child_done_ && up_.empty() ? POLLIN : 0) |
                                                     (!down_.empty() ? POLLOUT : 0));
        pollfd fds[2] = {{stream_over || stream_wants == 0 ? -1 : stream_.fd(), POLLIN, 0},
                         {child_wants != 0 ? sock_ : -1, child_wants, 0}};
        (void)::poll(fds, 2, -1);
    }
    [[nodiscard]] bool stream_failed() const { return stream_failed_; }

private:
    void child_to_stream() {
        if (!child_done_ && up_.empty()) {
            const ssize_t n = ::recv(sock_, up_.bytes.data(), up_.bytes.size(), MSG_DONTWAIT);
            if (n > 0) {
                up_.filled(static_cast<std::size_t>(n));
                moved_ = true;
            } else if (n == 0 || !transient(errno)) {
                child_done_ = true;  // closed its end (exit, PQfinish) or vanished
                moved_ = true;
            }
        }
        if (!up_.empty()) {
            const iovec v{up_.bytes.data() + up_.begin, up_.end - up_.begin};
            const ssize_t n = stream_.writev(&v, 1);
            if (n > 0) {
                up_.consumed(static_cast<std::size_t>(n));
                moved_ = true;
            } else if (n < 0 && !transient(errno)) {
                stream_failed_ = true;
            }
        }
    }

    void stream_to_child() {
        if (!stream_eof_ && down_.empty() && !stream_failed_) {
            const ssize_t n = stream_.read(down_.bytes.data(), down_.bytes.size());
            if (n > 0) {
                down_.filled(static_cast<std::size_t>(n));
                moved_ = true;
            } else if (n == 0) {
                stream_eof_ = true;
                (void)::shutdown(sock_, SHUT_WR);  // the child reads EOF after the last byte
                moved_ = true;
            } else if (!transient(errno)) {
                stream_failed_ = true;
            }
        }
        if (!down_.empty()) {
            const ssize_t n = ::send(sock_, down_.bytes.data() + down_.begin, down_.end - down_.begin,
                                     MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n > 0) {
                down_.consumed(static_cast<std::size_t>(n));
                moved_ = true;
            } else if (n < 0 && !transient(errno)) {
                child_done_ = true;  // gone: nobody left to read the rest
                down_.consumed(down_.end - down_.begin);
                moved_ = true;
            }
        }
    }

    Stream& stream_;
    int sock_;
    Pending up_;    // child -> stream
    Pending down_;  // stream -> child
    bool child_done_ = false;
    bool stream_eof_ = false;
    bool stream_failed_ = false;
    bool moved_ = false;
};

}  // namespace

void relay_stream(std::unique_ptr<Stream> stream, int sock) noexcept {
    try {
        Relay relay(*stream, sock);
        while (relay.step())
            if (!relay.moved()) relay.sleep();
        // The child is done: close in order, so the server reads every
        // byte it wrote and then EOF, as if the child had closed itself.
        // After a failure there is nothing to drain.
        if (!relay.stream_failed()) (void)stream->close();
    } catch (...) {
        // Out of memory: dropping the stream below disconnects it.
    }
    try {
        stream.reset();
    } catch (...) {
    }
    ::close(sock);
}

}  // namespace pg_rdma::transport
