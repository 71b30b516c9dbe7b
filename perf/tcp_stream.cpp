#include "perf/tcp_stream.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <utility>

#include "perf/bench_error.hpp"
#include "perf/bench_report.hpp"
#include "perf/owned_fd.hpp"

namespace pg_rdma::perf {

namespace {

using Fd = OwnedFd<::close>;

class TcpStream final : public ByteStream {
public:
    explicit TcpStream(int fd) : fd_(fd) {}

    ssize_t read(void* buf, std::size_t len) override { return ::recv(fd_.get(), buf, len, 0); }
    ssize_t write(const void* buf, std::size_t len) override
    {
        return ::send(fd_.get(), buf, len, MSG_NOSIGNAL);
    }
    [[nodiscard]] int fd() const override { return fd_.get(); }
    [[nodiscard]] const char* name() const override { return "tcp"; }
    [[nodiscard]] std::string stats_fields() const override { return {}; }

private:
    Fd fd_;
};

int new_socket(const Endpoint& ep)
{
    const int fd = ::socket(ep.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        throw_errno("socket");
    return fd;
}

void set_int_option(int fd, int level, int name, int value, const char* what)
{
    if (::setsockopt(fd, level, name, &value, sizeof value) != 0)
        throw_errno(what);
}

// Ping-pong must not wait for Nagle, and the phase code expects EAGAIN
// rather than blocking, exactly as with an RDMA connection.
std::unique_ptr<ByteStream> make_stream(int connected_fd)
{
    auto stream = std::make_unique<TcpStream>(connected_fd);
    set_int_option(connected_fd, IPPROTO_TCP, TCP_NODELAY, 1, "setsockopt(TCP_NODELAY)");
    const int flags = ::fcntl(connected_fd, F_GETFL);
    if (flags < 0 || ::fcntl(connected_fd, F_SETFL, flags | O_NONBLOCK) != 0)
        throw_errno("fcntl(O_NONBLOCK)");
    return stream;
}

}  // namespace

std::unique_ptr<ByteStream> tcp_accept_one(const Endpoint& at, int accept_timeout_ms)
{
    const Fd listener(new_socket(at));
    // Runs follow each other on one fixed port; the last one's TIME_WAIT
    // must not stop the next from binding.
    set_int_option(listener.get(), SOL_SOCKET, SO_REUSEADDR, 1, "setsockopt(SO_REUSEADDR)");
    if (::bind(listener.get(), at.sa(), at.addr_len) != 0)
        throw_errno("bind");
    if (::listen(listener.get(), 1) != 0)
        throw_errno("listen");
    sockaddr_storage bound{};
    socklen_t bound_len = sizeof bound;
    if (::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0)
        throw_errno("getsockname");
    print_listening("tcp", port_of(bound));
    if (!wait_readable(listener.get(), accept_timeout_ms))
        throw BenchError("accept: no client within " + std::to_string(accept_timeout_ms / 1000) +
                         " s");
    const int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0)
        throw_errno("accept");
    return make_stream(fd);
}

std::unique_ptr<ByteStream> tcp_connect(const Endpoint& to)
{
    Fd fd(new_socket(to));
    if (::connect(fd.get(), to.sa(), to.addr_len) != 0)
        throw_errno("connect");
    return make_stream(fd.release());
}

}  // namespace pg_rdma::perf
