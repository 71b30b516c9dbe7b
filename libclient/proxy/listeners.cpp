#include "libclient/proxy/listeners.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace pg_rdma::proxy {
namespace {

constexpr unsigned kLockFileMode = 0600;
constexpr std::size_t kPidTextBytes = 32;  // a PID and a newline, with room

sockaddr_un unix_address(const std::string& path)
{
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);  // endpoints.cpp checked the length
    return address;
}

// The PID on the lock file's first line, or 0.
pid_t lock_owner(int fd)
{
    char text[kPidTextBytes] = {};
    ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
    if (n <= 0)
        return 0;
    long pid = std::strtol(text, nullptr, 10);
    return pid > 0 ? static_cast<pid_t>(pid) : 0;
}

// "" when `path` may be bound: absent, or a socket file nobody answers on
// (removed here). Called with the lock held.
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
        return path + " is in use by a running process";
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
    // The files go before their locks are let go: whoever takes a lock
    // next finds no file of ours.
    for (const auto& path : files_)
        ::unlink(path.c_str());
    files_.clear();
    for (int fd : lock_fds_)
        ::close(fd);
    lock_fds_.clear();
}

std::string Listeners::open_unix(const std::string& path, unsigned socket_mode)
{
    std::string lock_path = path + ".lock";
    int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, kLockFileMode);
    if (lock < 0)
        return "cannot open the lock file " + lock_path + ": " + std::strerror(errno);
    // flock: between proxies, only one looks at the socket file at a time.
    // The PID inside: a PostgreSQL server's lock (it writes its own, and
    // does not flock) while that server lives.
    if (::flock(lock, LOCK_EX | LOCK_NB) < 0) {
        ::close(lock);
        return path + " is in use by another pgrdma proxy (" + lock_path + " is locked)";
    }
    pid_t owner = lock_owner(lock);
    if (owner != 0 && owner != ::getpid() && (::kill(owner, 0) == 0 || errno == EPERM)) {
        ::close(lock);
        return path + " is in use: process " + std::to_string(owner) + " holds " + lock_path +
               " (a PostgreSQL server on this directory and port?)";
    }
    std::string pid_line = std::to_string(::getpid()) + "\n";
    if (::ftruncate(lock, 0) < 0 || ::pwrite(lock, pid_line.data(), pid_line.size(), 0) < 0) {
        std::string error = "cannot write " + lock_path + ": " + std::strerror(errno);
        ::close(lock);
        return error;
    }
    lock_fds_.push_back(lock);
    files_.push_back(lock_path);
    if (auto error = clear_socket_file(path); !error.empty())
        return error;
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return std::string("socket: ") + std::strerror(errno);
    sockaddr_un address = unix_address(path);
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) < 0) {
        std::string error = "cannot listen on " + path + ": " + std::strerror(errno);
        ::close(fd);
        return error;
    }
    files_.push_back(path);
    if (::chmod(path.c_str(), socket_mode) < 0 || ::listen(fd, kListenBacklog) < 0) {
        std::string error = "cannot listen on " + path + ": " + std::strerror(errno);
        ::close(fd);
        return error;
    }
    fds_.push_back(fd);
    return "";
}

std::string Listeners::open(const ListenEndpoint& endpoint, unsigned socket_mode)
{
    if (const auto* unix_listen = std::get_if<UnixListen>(&endpoint))
        return open_unix(unix_listen->path, socket_mode);
    std::string where = describe(endpoint);
    const auto& tcp = std::get<TcpListen>(endpoint);
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
    addrinfo* found = nullptr;
    std::string port = std::to_string(tcp.port);
    if (int rc = ::getaddrinfo(tcp.host.c_str(), port.c_str(), &hints, &found); rc != 0)
        return where + ": " + ::gai_strerror(rc);
    int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
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
