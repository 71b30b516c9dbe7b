#include "libclient/proxy/relay.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "libclient/proxy/refusal.hpp"
#include "protocol/session_opener.hpp"

namespace pg_rdma::proxy {
namespace {

using Clock = std::chrono::steady_clock;

// Per direction. A PostgreSQL message stream has no use for more: the
// kernel's socket buffers and the transport's ring hold the rest.
constexpr std::size_t kFlowBufferBytes = 64 * 1024;
// The client's first message is what the library judges at the first
// write, and a first write that holds only part of it may not be judged at
// all: the proxy reads it whole (protocol::opener_length) before it
// connects. Until its header is in, it reads no more than a header.
constexpr std::size_t kHeaderBytes = 8;
// libpq_rdma.so follows descriptor numbers below this only (its socket
// table; libclient/README.md, "Known limits"): a server socket numbered
// higher would stay on TCP whatever the policy says.
constexpr int kLibraryDescriptorLimit = 65536;
// After refusing an SSLRequest ('N'), how long the client has to send its
// StartupMessage in the clear and read why it is refused.
constexpr std::chrono::seconds kRefusalReadTimeout{5};

class Socket {
public:
    explicit Socket(int fd = -1) : fd_(fd) {}
    ~Socket()
    {
        if (fd_ >= 0)
            ::close(fd_);
    }
    Socket(const Socket&) = delete;
    Socket& operator=(const Socket&) = delete;
    Socket(Socket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
    Socket& operator=(Socket&& other) noexcept
    {
        std::swap(fd_, other.fd_);
        return *this;
    }
    [[nodiscard]] int get() const { return fd_; }

private:
    int fd_;
};

// Bytes read from one side, not yet written to the other.
struct Flow {
    explicit Flow(std::size_t capacity = kFlowBufferBytes) : buffer(capacity) {}
    std::vector<std::uint8_t> buffer;
    std::size_t begin = 0;
    std::size_t end = 0;
    bool ended = false;     // the source said end of file
    std::size_t moved = 0;  // bytes written to the other side, in all

    [[nodiscard]] bool pending() const { return begin < end; }
    [[nodiscard]] bool room() const { return end < buffer.size(); }
    [[nodiscard]] std::span<const std::uint8_t> held() const { return {buffer.data() + begin, end - begin}; }
};

enum class Io { Moved, WouldBlock, Ended, Failed };

Io fill(int fd, Flow& flow, std::size_t want, int& error)
{
    ssize_t n = ::recv(fd, flow.buffer.data() + flow.end, std::min(want, flow.buffer.size() - flow.end), 0);
    if (n > 0) {
        flow.end += static_cast<std::size_t>(n);
        return Io::Moved;
    }
    if (n == 0) {
        flow.ended = true;
        return Io::Ended;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return Io::WouldBlock;
    error = errno;
    return Io::Failed;
}

Io fill(int fd, Flow& flow, int& error)
{
    return fill(fd, flow, flow.buffer.size(), error);
}

Io drain(int fd, Flow& flow, int& error)
{
    ssize_t n = ::send(fd, flow.buffer.data() + flow.begin, flow.end - flow.begin, MSG_NOSIGNAL);
    if (n >= 0) {
        flow.begin += static_cast<std::size_t>(n);
        flow.moved += static_cast<std::size_t>(n);
        if (flow.begin == flow.end)
            flow.begin = flow.end = 0;
        return Io::Moved;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return Io::WouldBlock;
    error = errno;
    return Io::Failed;
}

int remaining_ms(Clock::time_point deadline)
{
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left > 0 ? static_cast<int>(left) : 0;
}

void log_line(const std::string& label, const std::string& what)
{
    std::fprintf(stderr, "pgrdma proxy: %s: %s\n", label.c_str(), what.c_str());
}

// Reads the client's first message whole (protocol::opener_length), or
// what came before end of file. False when the client went away or said
// nothing in time.
bool read_opening(int client, Flow& flow, std::chrono::milliseconds timeout, const std::string& label)
{
    auto deadline = Clock::now() + timeout;
    for (;;) {
        std::size_t want = protocol::opener_length(flow.held());
        if (want != 0 && flow.end >= want)
            return true;
        pollfd pfd{client, POLLIN, 0};
        int ready = ::poll(&pfd, 1, remaining_ms(deadline));
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0) {
            if (ready == 0)
                log_line(label, "the client sent no whole first message within " +
                                    std::to_string(timeout.count() / 1000) + " s; closed");
            return false;
        }
        int error = 0;
        // Never past the first message: what follows it (a pipelined
        // StartupMessage after an SSLRequest) goes in later writes.
        std::size_t up_to = want != 0 ? want - flow.end : kHeaderBytes - std::min(flow.end, kHeaderBytes);
        switch (fill(client, flow, std::max<std::size_t>(up_to, 1), error)) {
        case Io::Moved:
        case Io::WouldBlock:
            break;
        case Io::Ended:
            return flow.end > 0;
        case Io::Failed:
            return false;
        }
    }
}

// A non-blocking TCP connection to one of the server's addresses; the
// socket, or -1 with `why` saying what failed for the last address tried.
Socket connect_server(const RelaySettings& settings, std::string& why)
{
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    std::string port = std::to_string(settings.server.port);
    if (int rc = ::getaddrinfo(settings.server.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
        why = std::string("could not resolve the server's name: ") + ::gai_strerror(rc);
        return Socket();
    }
    why = "no address";
    for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
        Socket s(::socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
        if (s.get() < 0) {
            why = std::strerror(errno);
            continue;
        }
        if (s.get() >= kLibraryDescriptorLimit) {
            why = "the proxy has too many descriptors open (this one is number " + std::to_string(s.get()) +
                  ", and libpq_rdma.so follows numbers below " + std::to_string(kLibraryDescriptorLimit) +
                  "): lower --max-connections";
            break;
        }
        // As libpq does by default: a TCP session (a fallback) whose server
        // or path died is noticed rather than left waiting for ever.
        int one = 1;
        ::setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        ::setsockopt(s.get(), SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
        int error = 0;
        if (::connect(s.get(), ai->ai_addr, ai->ai_addrlen) < 0) {
            if (errno != EINPROGRESS) {
                error = errno;
            } else {
                pollfd pfd{s.get(), POLLOUT, 0};
                auto deadline = Clock::now() + settings.connect_timeout;
                int ready;
                do {
                    ready = ::poll(&pfd, 1, remaining_ms(deadline));
                } while (ready < 0 && errno == EINTR);
                socklen_t len = sizeof error;
                if (ready == 0)
                    error = ETIMEDOUT;
                else if (ready < 0 || ::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &error, &len) < 0)
                    error = errno;
            }
        }
        if (error == 0) {
            ::freeaddrinfo(found);
            return s;
        }
        why = std::strerror(error);
    }
    ::freeaddrinfo(found);
    return Socket();
}

// Best effort: the client socket is non-blocking, and a client too slow to
// take a few hundred bytes loses them, as it loses the connection next.
void send_all_best_effort(int fd, std::span<const std::uint8_t> bytes)
{
    while (!bytes.empty()) {
        ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        bytes = bytes.subspan(static_cast<std::size_t>(n));
    }
}

// Tells the client why, in its own protocol, when it can read that. A
// client that asked for TLS or GSS encryption first is told "no" ('N', as
// a server without TLS says): libpq no longer shows an ErrorResponse sent
// in answer to an SSLRequest (since the fixes for CVE-2024-10977), so the
// reason goes after the StartupMessage a client that may continue in the
// clear (sslmode=prefer) sends next. One that insists on TLS closes
// instead, saying the server does not support it; the proxy's log has why.
void refuse(int client, std::span<const std::uint8_t> opening, const Refusal& refusal)
{
    if (!answers_in_clear(opening))
        return;
    auto kind = protocol::classify_opener(opening);
    if (kind == protocol::Opener::SslRequest || kind == protocol::Opener::GssEncRequest) {
        const std::uint8_t no = 'N';
        send_all_best_effort(client, {&no, 1});
        Flow next(protocol::kMaxOpenerLength);
        using std::chrono::milliseconds;
        if (!read_opening(client, next, std::chrono::duration_cast<milliseconds>(kRefusalReadTimeout), "refused") ||
            protocol::classify_opener(next.held()) != protocol::Opener::Startup)
            return;
    }
    send_all_best_effort(client, error_response(refusal));
}

Refusal server_failure(const RelaySettings& settings, int error)
{
    std::string where = describe(settings.server);
    if (error == ECONNREFUSED)
        return {kSqlStateCannotConnect,
                "pgrdma proxy: the server " + where + " cannot be reached over RDMA, and the proxy may not use TCP",
                "The policy for this server is with_rsocket=require (WITH_RSOCKET, or a rule of the servers "
                "file); the proxy's log gives the reason (a line starting \"WARNING:  with_rsocket\").",
                "Check that the server has pg_rdma listening on this address (pg_rdma.listen_addresses) and "
                "that this host has an RDMA device routing to it, or allow TCP for this server "
                "(WITH_RSOCKET=true, or the servers file's rule)."};
    return {kSqlStateCannotConnect,
            "pgrdma proxy: the connection to the server " + where + " failed: " + std::strerror(error), "", ""};
}

// Copies both ways until one side has ended and everything it sent has
// been passed on, or a call fails.
void relay(int client, int server, std::span<const std::uint8_t> opening, const RelaySettings& settings,
           const std::string& label)
{
    Flow up;    // client -> server
    Flow down;  // server -> client
    std::copy(opening.begin(), opening.end(), up.buffer.begin());
    up.end = opening.size();
    int error = 0;
    for (;;) {
        if ((up.ended && !up.pending()) || (down.ended && !down.pending()))
            return;
        // A side with nothing asked of it is left out (-1): poll would
        // otherwise report its hang-up at once, again and again.
        std::array<pollfd, 2> pfd{};
        auto client_events =
            static_cast<short>(((!up.ended && up.room()) ? POLLIN : 0) | (down.pending() ? POLLOUT : 0));
        auto server_events =
            static_cast<short>(((!down.ended && down.room()) ? POLLIN : 0) | (up.pending() ? POLLOUT : 0));
        pfd[0] = {client_events != 0 ? client : -1, client_events, 0};
        pfd[1] = {server_events != 0 ? server : -1, server_events, 0};
        if (::poll(pfd.data(), pfd.size(), -1) < 0) {
            if (errno == EINTR)
                continue;
            log_line(label, std::string("poll failed: ") + std::strerror(errno));
            return;
        }
        // What was just read is written at once, without waiting for
        // poll to say the other side is writable (it nearly always is):
        // one poll per message instead of two.
        constexpr short kReadable = POLLIN | POLLHUP | POLLERR;
        if ((pfd[0].revents & kReadable) && (client_events & POLLIN) && fill(client, up, error) == Io::Failed)
            return;  // the client went away: nothing to tell it
        if (up.pending() && drain(server, up, error) == Io::Failed)
            break;
        if ((pfd[1].revents & kReadable) && (server_events & POLLIN) && fill(server, down, error) == Io::Failed)
            break;
        if (down.pending() && drain(client, down, error) == Io::Failed)
            return;
    }
    // A call on the server's socket failed. Before the server said
    // anything, the client can still be told why in its own protocol.
    if (down.moved == 0 && !down.pending()) {
        Refusal refusal = server_failure(settings, error);
        refuse(client, opening, refusal);
        log_line(label, refusal.message);
    } else if (error != ECONNRESET && error != EPIPE) {
        log_line(label, std::string("the server's side failed: ") + std::strerror(error));
    }
}

// Counts a session in while it is carried.
class SessionCount {
public:
    explicit SessionCount(std::atomic<unsigned>& count) : count_(count), value_(++count) {}
    ~SessionCount() { --count_; }
    SessionCount(const SessionCount&) = delete;
    SessionCount& operator=(const SessionCount&) = delete;
    [[nodiscard]] unsigned value() const { return value_; }

private:
    std::atomic<unsigned>& count_;
    unsigned value_;
};

}  // namespace

void carry(int client_fd, const RelaySettings& settings, std::atomic<unsigned>& sessions,
           const std::string& label) noexcept
{
    Socket client(client_fd);
    try {
        int one = 1;
        ::setsockopt(client.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // fails harmlessly on a Unix socket
        Flow opening(protocol::kMaxOpenerLength);
        if (!read_opening(client.get(), opening, settings.opening_timeout, label))
            return;
        SessionCount counted(sessions);
        if (counted.value() > settings.max_sessions) {
            // As PostgreSQL answers past max_connections: after the client's
            // first message, so that it can read why.
            Refusal refusal{kSqlStateTooManyConnections,
                            "pgrdma proxy: too many connections (--max-connections is " +
                                std::to_string(settings.max_sessions) + ")",
                            "", ""};
            refuse(client.get(), opening.held(), refusal);
            log_line(label, "refused: " + std::to_string(settings.max_sessions) +
                                " sessions already open (--max-connections)");
            return;
        }
        std::string why;
        Socket server = connect_server(settings, why);
        if (server.get() < 0) {
            Refusal refusal{kSqlStateCannotConnect,
                            "pgrdma proxy: could not connect to the server " + describe(settings.server) + ": " + why,
                            "", ""};
            refuse(client.get(), opening.held(), refusal);
            log_line(label, refusal.message);
            return;
        }
        relay(client.get(), server.get(), opening.held(), settings, label);
    } catch (const std::exception& e) {
        log_line(label, std::string("closed: ") + e.what());
    }
}

}  // namespace pg_rdma::proxy
