#include "libclient/proxy/endpoints.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <charconv>

namespace pg_rdma::proxy {
namespace {

// Room in sockaddr_un::sun_path, its terminating NUL excluded.
constexpr std::size_t kMaxSocketPathBytes = sizeof(sockaddr_un::sun_path) - 1;

// "5432" -> 5432; false for anything but 1..65535 in decimal.
bool parse_port(std::string_view text, std::uint16_t& port)
{
    unsigned value = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc{} || ptr != end || value == 0 || value > 65535)
        return false;
    port = static_cast<std::uint16_t>(value);
    return true;
}

// Splits HOST, HOST:PORT or [V6]:PORT; `port` keeps its value when none is
// given. Returns "" or what is wrong.
std::string split_host_port(std::string_view text, std::string& host, std::uint16_t& port)
{
    std::string_view rest;
    if (!text.empty() && text.front() == '[') {
        auto close = text.find(']');
        if (close == std::string_view::npos)
            return "a '[' without its ']'";
        host = std::string(text.substr(1, close - 1));
        rest = text.substr(close + 1);
        if (!rest.empty() && rest.front() != ':')
            return "text after ']' that is not ':PORT'";
    } else {
        auto colon = text.find(':');
        if (colon != std::string_view::npos && text.find(':', colon + 1) != std::string_view::npos)
            return "an IPv6 address needs brackets: [ADDRESS]:PORT";
        host = std::string(text.substr(0, colon));
        rest = colon == std::string_view::npos ? std::string_view{} : text.substr(colon);
    }
    if (host.empty())
        return "no host";
    if (!rest.empty() && !parse_port(rest.substr(1), port))
        return "the port is not a number from 1 to 65535";
    return "";
}

bool is_loopback(const std::string& host)
{
    in_addr v4{};
    if (inet_pton(AF_INET, host.c_str(), &v4) == 1)
        return (ntohl(v4.s_addr) >> 24) == IN_LOOPBACKNET;
    in6_addr v6{};
    return inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

bool all_digits(std::string_view text)
{
    return !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
}

}  // namespace

std::string parse_server(std::string_view text, ServerEndpoint& out)
{
    ServerEndpoint server;
    if (auto error = split_host_port(text, server.host, server.port); !error.empty())
        return "server '" + std::string(text) + "': " + error;
    out = server;
    return "";
}

std::string parse_listen(std::string_view text, std::uint16_t server_port, bool is_directory,
                         ListenEndpoint& out)
{
    if (!text.empty() && text.front() == '/') {
        if (!is_directory)
            return "listen '" + std::string(text) +
                   "': not an existing directory (a Unix socket is given as the directory it goes in)";
        UnixListen unix_listen{postgres_socket_path(text, server_port)};
        if (unix_listen.path.size() > kMaxSocketPathBytes)
            return "listen '" + std::string(text) + "': the socket path " + unix_listen.path + " is longer than " +
                   std::to_string(kMaxSocketPathBytes) + " bytes";
        out = unix_listen;
        return "";
    }
    if (text.find('/') != std::string_view::npos || (!text.empty() && text.front() == '.'))
        return "listen '" + std::string(text) + "': a socket directory must be an absolute path";
    TcpListen tcp{kDefaultListenHost, 0};
    if (all_digits(text)) {
        if (!parse_port(text, tcp.port))
            return "listen '" + std::string(text) + "': the port is not a number from 1 to 65535";
    } else {
        if (auto error = split_host_port(text, tcp.host, tcp.port); !error.empty())
            return "listen '" + std::string(text) + "': " + error;
        if (tcp.port == 0)
            return "listen '" + std::string(text) + "': no port (HOST:PORT)";
        if (!is_loopback(tcp.host))
            return "listen '" + std::string(text) +
                   "': not a numeric loopback address (127.0.0.0/8 or ::1); the proxy does not listen "
                   "where other hosts reach it, since the server takes every session for this host's";
    }
    out = tcp;
    return "";
}

std::string describe(const ServerEndpoint& server)
{
    bool v6 = server.host.find(':') != std::string::npos;
    return (v6 ? "[" + server.host + "]" : server.host) + ":" + std::to_string(server.port);
}

std::string describe(const ListenEndpoint& listen)
{
    if (const auto* unix_listen = std::get_if<UnixListen>(&listen))
        return unix_listen->path;
    const auto& tcp = std::get<TcpListen>(listen);
    return describe(ServerEndpoint{tcp.host, tcp.port});
}

std::string postgres_socket_path(std::string_view directory, std::uint16_t port)
{
    std::string path(directory);
    while (path.size() > 1 && path.back() == '/')
        path.pop_back();
    if (path != "/")
        path += '/';
    return path + ".s.PGSQL." + std::to_string(port);
}

}  // namespace pg_rdma::proxy
