// A minimal PostgreSQL protocol-3 client over the pg_rdma transport, for the
// backend tests: it exercises the server side (upgrade in the backend's
// first read, the session over RDMA) without depending on the client
// library. Trust authentication only; simple queries; rows printed as
// "col|col" lines.
//
//   pg_wire_probe HOST PORT USER DBNAME [--tcp|--prefer] [--sleep-ms N] QUERY...
//
// Without an option RDMA is required. --tcp skips the upgrade (a plain TCP
// session on the same address); --prefer asks for RDMA and continues on TCP
// when the server declines (printing "fallback: <why>" to stderr).
// --sleep-ms sleeps between queries without touching the connection (an
// idle client). Exit status: 0 when every query succeeded, 1 on a server
// error (printed as "ERROR: ..."), 2 when the connection failed.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transport/tcp_upgrade.hpp"

namespace {

using pg_rdma::transport::Connection;

// Either transport, blocking.
class Wire {
public:
    Wire(int fd, std::unique_ptr<Connection> conn) : fd_(fd), conn_(std::move(conn)) {}
    bool write_all(const std::string& bytes) {
        std::size_t done = 0;
        while (done < bytes.size()) {
            const ssize_t n = conn_ ? conn_->write(bytes.data() + done, bytes.size() - done)
                                    : ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
            if (n > 0) {
                done += static_cast<std::size_t>(n);
            } else if (n < 0 && errno == EAGAIN && conn_) {
                if (conn_->wait(POLLOUT, -1) < 0) return false;
            } else {
                return false;
            }
        }
        return true;
    }
    bool read_exact(void* buf, std::size_t len) {
        auto* out = static_cast<char*>(buf);
        std::size_t done = 0;
        while (done < len) {
            const ssize_t n = conn_ ? conn_->read(out + done, len - done) : ::recv(fd_, out + done, len - done, 0);
            if (n > 0) {
                done += static_cast<std::size_t>(n);
            } else if (n < 0 && errno == EAGAIN && conn_) {
                if (conn_->wait(POLLIN, -1) < 0) return false;
            } else {
                if (n == 0) errno = ECONNRESET;
                return false;
            }
        }
        return true;
    }
    [[nodiscard]] Connection* connection() const { return conn_.get(); }

private:
    int fd_;
    std::unique_ptr<Connection> conn_;
};

void put32(std::string& s, std::uint32_t v) {
    v = htonl(v);
    s.append(reinterpret_cast<const char*>(&v), 4);
}

std::string message(char type, const std::string& body) {
    std::string m(1, type);
    put32(m, static_cast<std::uint32_t>(body.size() + 4));
    return m + body;
}

struct Msg {
    char type = 0;
    std::string body;
};

bool next(Wire& w, Msg& m) {
    char header[5];
    if (!w.read_exact(header, 5)) return false;
    std::uint32_t len = 0;
    std::memcpy(&len, header + 1, 4);
    len = ntohl(len);
    if (len < 4 || len > (1u << 30)) return false;
    m.type = header[0];
    m.body.assign(len - 4, '\0');
    return len == 4 || w.read_exact(m.body.data(), len - 4);
}

std::string error_text(const std::string& body) {
    // Fields: type byte + C string; 'M' is the message.
    std::string sev, text;
    for (std::size_t i = 0; i < body.size() && body[i] != '\0';) {
        const char f = body[i++];
        const std::string v = body.c_str() + i;
        i += v.size() + 1;
        if (f == 'S') sev = v;
        if (f == 'M') text = v;
    }
    return sev + ": " + text;
}

// Reads up to ReadyForQuery; prints rows and errors. false on a transport failure.
bool until_ready(Wire& w, bool& had_error) {
    Msg m;
    for (;;) {
        if (!next(w, m)) return false;
        switch (m.type) {
            case 'Z': return true;
            case 'E':
                had_error = true;
                std::printf("%s\n", error_text(m.body).c_str());
                break;
            case 'D': {
                std::uint16_t n = 0;
                std::memcpy(&n, m.body.data(), 2);
                n = ntohs(n);
                std::size_t at = 2;
                std::string line;
                for (std::uint16_t c = 0; c < n; ++c) {
                    std::uint32_t len = 0;
                    std::memcpy(&len, m.body.data() + at, 4);
                    len = ntohl(len);
                    at += 4;
                    if (c > 0) line += '|';
                    if (len != 0xFFFFFFFFu) {
                        line.append(m.body, at, len);
                        at += len;
                    }
                }
                std::printf("%s\n", line.c_str());
                break;
            }
            case 'R': {
                std::uint32_t code = 0;
                std::memcpy(&code, m.body.data(), 4);
                if (ntohl(code) != 0) {
                    std::printf("FATAL: pg_wire_probe supports trust authentication only\n");
                    return false;
                }
                break;
            }
            default: break;  // S, K, T, C, N, A
        }
        std::fflush(stdout);
    }
}

int connect_tcp(const char* host, const char* port) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* ai = nullptr;
    if (getaddrinfo(host, port, &hints, &ai) != 0) return -1;
    const int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 6) {
        std::fprintf(stderr, "usage: %s HOST PORT USER DBNAME [--tcp] [--sleep-ms N] QUERY...\n", argv[0]);
        return 2;
    }
    bool tcp = false;
    bool prefer = false;
    int sleep_ms = 0;
    std::vector<std::string> queries;
    for (int i = 5; i < argc; ++i) {
        if (std::strcmp(argv[i], "--tcp") == 0) tcp = true;
        else if (std::strcmp(argv[i], "--prefer") == 0) prefer = true;
        else if (std::strcmp(argv[i], "--sleep-ms") == 0 && i + 1 < argc) sleep_ms = std::atoi(argv[++i]);
        else queries.emplace_back(argv[i]);
    }
    const int fd = connect_tcp(argv[1], argv[2]);
    if (fd < 0) {
        std::fprintf(stderr, "pg_wire_probe: cannot connect to %s:%s: %s\n", argv[1], argv[2], std::strerror(errno));
        return 2;
    }
    std::unique_ptr<Connection> conn;
    if (!tcp) {
        using pg_rdma::transport::UpgradeOutcome;
        auto result = pg_rdma::transport::upgrade_client(
            fd, prefer ? pg_rdma::transport::Mode::Prefer : pg_rdma::transport::Mode::Require,
            pg_rdma::transport::Settings{});
        if (result.outcome == UpgradeOutcome::TcpSame) {
            std::fprintf(stderr, "fallback: %s\n", result.error.message.c_str());
        } else if (result.outcome != UpgradeOutcome::Rdma) {
            std::fprintf(stderr, "pg_wire_probe: no RDMA: %s\n", result.error.message.c_str());
            return 2;
        }
        conn = std::move(result.connection);
    }
    Wire wire(fd, std::move(conn));
    std::string startup;
    put32(startup, 196608);  // protocol 3.0
    const std::vector<std::string> params{"user", argv[3], "database", argv[4]};
    for (const std::string& kv : params) startup += kv + '\0';
    startup += '\0';
    std::string packet;
    put32(packet, static_cast<std::uint32_t>(startup.size() + 4));
    packet += startup;
    bool had_error = false;
    if (!wire.write_all(packet) || !until_ready(wire, had_error)) {
        std::fprintf(stderr, "pg_wire_probe: startup failed: %s\n", std::strerror(errno));
        return 2;
    }
    for (std::size_t q = 0; q < queries.size(); ++q) {
        if (q > 0 && sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
        if (!wire.write_all(message('Q', queries[q] + '\0')) || !until_ready(wire, had_error)) {
            std::fprintf(stderr, "pg_wire_probe: query failed: %s\n", std::strerror(errno));
            return 2;
        }
    }
    wire.write_all(message('X', ""));
    if (wire.connection() != nullptr) wire.connection()->close();
    close(fd);
    return had_error ? 1 : 0;
}
