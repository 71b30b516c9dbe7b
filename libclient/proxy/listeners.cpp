#include "libclient/proxy/listeners.hpp"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pg_rdma::proxy {
namespace {

sockaddr_un unix_address(const std::string& path)
{
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);  // endpoints.cpp checked the length
    return address;
}

// "" when `path` may be bound: absent, or a socket file nobody answers on
// (removed here).
std::string clear_socket_file(const std::string& path)
{
    struct stat st{};
    if (::lstat(path.c_str(), &st) < 0)
        return errno == ENOENT ? "" : path + ": " + std::strerror(errno);
    if (!S_ISSOCK(st.st_mode))
        return path + " exists and is not a socket";
    int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe < 0)
        return std::string("socket: ") + std::strerror(errno);
    sockaddr_un address = unix_address(path);
    int rc = ::connect(probe, reinterpret_cast<const sockaddr*>(&address), sizeof address);
    int error = errno;
    ::close(probe);
    if (rc == 0)
        return path + " is in use by a running process (another proxy, or a PostgreSQL server)";
    if (error != ECONNREFUSED)
        return path + ": " + std::strerror(error);
    if (::unlink(path.c_str()) < 0 && errno != ENOENT)
        return "cannot remove the stale socket " + path + ": " + std::strerror(errno);
    return "";
}

}  // namespace

Listeners::~Listeners()
{
    close_all();
}

void Listeners::close_all()
{
    for (int fd : fds_)
        ::close(fd);
    fds_.clear();
    for (const auto& path : socket_files_)
        ::unlink(path.c_str());
    socket_files_.clear();
}

std::string Listeners::open(const ListenEndpoint& endpoint)
{
    std::string where = describe(endpoint);
    if (const auto* unix_listen = std::get_if<UnixListen>(&endpoint)) {
        if (auto error = clear_socket_file(unix_listen->path); !error.empty())
            return error;
        int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return std::string("socket: ") + std::strerror(errno);
        sockaddr_un address = unix_address(unix_listen->path);
        if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) < 0) {
            std::string error = "cannot listen on " + where + ": " + std::strerror(errno);
            ::close(fd);
            return error;
        }
        socket_files_.push_back(unix_listen->path);
        if (::chmod(unix_listen->path.c_str(), kSocketFileMode) < 0 || ::listen(fd, kListenBacklog) < 0) {
            std::string error = "cannot listen on " + where + ": " + std::strerror(errno);
            ::close(fd);
            return error;
        }
        fds_.push_back(fd);
        return "";
    }
    const auto& tcp = std::get<TcpListen>(endpoint);
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
    addrinfo* found = nullptr;
    std::string port = std::to_string(tcp.port);
    if (int rc = ::getaddrinfo(tcp.host.c_str(), port.c_str(), &hints, &found); rc != 0)
        return where + ": " + ::gai_strerror(rc);
    int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    std::string error;
    int one = 1;
    if (fd < 0)
        error = std::string("socket: ") + std::strerror(errno);
    else if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
             ::bind(fd, found->ai_addr, found->ai_addrlen) < 0 || ::listen(fd, kListenBacklog) < 0)
        error = "cannot listen on " + where + ": " + std::strerror(errno);
    ::freeaddrinfo(found);
    if (!error.empty()) {
        if (fd >= 0)
            ::close(fd);
        return error;
    }
    fds_.push_back(fd);
    return "";
}

}  // namespace pg_rdma::proxy
