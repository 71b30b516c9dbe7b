// The addresses `pgrdma proxy` is given: the server it carries connections
// to, and where it listens for them. Pure parsing, no sockets.
//
//   server  HOST, HOST:PORT or [IPV6]:PORT (PostgreSQL's 5432 by default);
//           HOST may be a name, resolved again for every connection
//   listen  an absolute path to a directory: the socket is PostgreSQL's
//           name in it (DIR/.s.PGSQL.PORT, PORT the server's), since a
//           client finds a Unix socket by directory and port
//           (host=DIR port=PORT), never by a file name;
//           PORT, HOST:PORT or [IPV6]:PORT: a TCP port on a loopback
//           address only (127.0.0.0/8, ::1; 127.0.0.1 by default), since
//           every session arrives at the server from this host's address
//           and is judged by pg_hba.conf as this host's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

namespace pg_rdma::proxy {

inline constexpr std::uint16_t kDefaultPostgresPort = 5432;
inline constexpr const char* kDefaultListenHost = "127.0.0.1";

struct ServerEndpoint {
    std::string host;  // as given: a name or a numeric address, no brackets
    std::uint16_t port = kDefaultPostgresPort;
};

struct UnixListen {
    std::string path;  // the socket file, DIR/.s.PGSQL.PORT
};

struct TcpListen {
    std::string host;  // a numeric loopback address, no brackets
    std::uint16_t port = 0;
};

using ListenEndpoint = std::variant<UnixListen, TcpListen>;

// Each fills `out` and returns "" when `text` is valid, else says what is
// wrong with it (for the command's error line).
std::string parse_server(std::string_view text, ServerEndpoint& out);
// `is_directory` tells whether an absolute path names an existing
// directory (the caller asks the file system; the tests pass an answer).
std::string parse_listen(std::string_view text, std::uint16_t server_port, bool is_directory,
                         ListenEndpoint& out);

// "host:port", "[v6]:port" or the socket path, for messages.
std::string describe(const ServerEndpoint& server);
std::string describe(const ListenEndpoint& listen);

// PostgreSQL's socket file name in a directory: DIR/.s.PGSQL.PORT.
std::string postgres_socket_path(std::string_view directory, std::uint16_t port);

}  // namespace pg_rdma::proxy
