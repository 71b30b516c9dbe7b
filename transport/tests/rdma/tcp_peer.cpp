#include "tcp_peer.hpp"

#include <arpa/inet.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "peer_process.hpp"
#include "transport/directory.hpp"
#include "transport/pinned_buffer.hpp"

namespace pg_rdma::test {

sockaddr_in ipv4(const char* ip, std::uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) throw std::runtime_error(std::string("not an IPv4 address: ") + ip);
    return a;
}

std::string ip_of(const sockaddr_in& a) {
    char buf[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
    return buf;
}

TcpListener::TcpListener(const char* ip) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = ip != nullptr ? ipv4(ip) : rdma_address(0);
    socklen_t len = sizeof a;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 8) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
        throw std::runtime_error("TCP listener setup failed");
    port = ntohs(a.sin_port);
}

TcpListener::~TcpListener() { close(fd); }

int TcpListener::accept_one() const { return ::accept(fd, nullptr, nullptr); }

int tcp_connect(std::uint16_t port, const char* source_ip) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (source_ip != nullptr) {
        sockaddr_in src = ipv4(source_ip);
        if (bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) {
            close(fd);
            return -1;
        }
    }
    sockaddr_in a = rdma_address(port);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

bool read_fully(int fd, void* buf, std::size_t n) {
    auto* p = static_cast<std::uint8_t*>(buf);
    while (n > 0) {
        const ssize_t r = recv(fd, p, n, 0);
        if (r <= 0) return false;
        p += r;
        n -= static_cast<std::size_t>(r);
    }
    return true;
}

bool send_fully(int fd, const void* buf, std::size_t n) {
    const auto* p = static_cast<const std::uint8_t*>(buf);
    while (n > 0) {
        const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return false;
        p += w;
        n -= static_cast<std::size_t>(w);
    }
    return true;
}

bool read_upgrade_request(int fd) {
    std::uint8_t first[protocol::kUpgradeRequestLength];
    if (!read_fully(fd, first, sizeof first)) return false;
    const auto kind = protocol::classify_first_packet(first);
    return kind.is_ok() && kind.value == protocol::FirstPacket::Upgrade;
}

bool request_and_read_accept(int fd, protocol::UpgradeAcceptBytes& reply) {
    const auto request = protocol::encode_upgrade_request();
    return send_fully(fd, request.data(), request.size()) && read_fully(fd, reply.data(), reply.size()) &&
           reply[0] == protocol::kReplyAccept;
}

protocol::UpgradeAcceptBytes accept_reply(const sockaddr_in& endpoint, const protocol::Nonce& nonce,
                                          std::chrono::milliseconds setup_budget) {
    protocol::RdmaEndpoint ep;
    ep.setup_budget = protocol::encode_setup_budget(static_cast<std::uint64_t>(setup_budget.count()));
    ep.family = 4;
    ep.port = ntohs(endpoint.sin_port);
    std::memcpy(ep.address.data(), &endpoint.sin_addr, 4);
    ep.nonce = nonce;
    return protocol::encode_upgrade_accept(ep);
}

namespace {

bool is_ipv6(const std::string& ip) { return ip.find(':') != std::string::npos; }

// rxe lists a RoCE v2 GID per address of its netdev, in sysfs as eight
// groups of four hex digits: an IPv6 address as it is, an IPv4 one as
// ::ffff:a.b.c.d ("0000:0000:0000:0000:0000:ffff:0a63:0002").
std::string gid_text(const std::string& ip) {
    std::uint8_t b[16] = {};
    if (is_ipv6(ip)) {
        if (inet_pton(AF_INET6, ip.c_str(), b) != 1) throw std::runtime_error("not an IPv6 address: " + ip);
    } else {
        const sockaddr_in a = ipv4(ip.c_str());
        b[10] = b[11] = 0xff;
        std::memcpy(b + 12, &a.sin_addr, 4);
    }
    std::string text;
    char group[8];
    for (int i = 0; i < 16; i += 2) {
        std::snprintf(group, sizeof group, "%s%02x%02x", i == 0 ? "" : ":", b[i], b[i + 1]);
        text += group;
    }
    return text;
}

// The `ip` command for an extra address: IPv4 in the guest's /24, IPv6 in a
// /64 without duplicate detection (usable at once; the netdev has no wire
// to find a duplicate on).
std::string addr_command(const std::string& ip, const std::string& verb, const std::string& netdev) {
    if (is_ipv6(ip)) return "ip -6 addr " + verb + " " + ip + "/64 dev " + netdev + (verb == "add" ? " nodad" : "");
    return "ip addr " + verb + " " + ip + "/24 dev " + netdev;
}

bool device_has_gid(const std::string& gid) {
    const char* dev = std::getenv("RXE_DEV");
    const std::string dir = std::string("/sys/class/infiniband/") + (dev != nullptr ? dev : "rxe0") + "/ports/1/gids/";
    for (int i = 0; i < 32; ++i) {
        std::ifstream in(dir + std::to_string(i));
        std::string line;
        if (in && std::getline(in, line) && line == gid) return true;
    }
    return false;
}

constexpr auto kGidWait = std::chrono::seconds(10);  // rxe adds GIDs from a workqueue

}  // namespace

ExtraAddress::ExtraAddress(const char* ip) : ip_(ip) {
    const char* netdev = std::getenv("RXE_NETDEV");
    if (netdev == nullptr) throw std::runtime_error("RXE_NETDEV is not set: run this test in the Soft-RoCE guest");
    const std::string cmd = addr_command(ip_, "add", netdev);
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
    const auto until = std::chrono::steady_clock::now() + kGidWait;
    while (!device_has_gid(gid_text(ip_))) {
        if (std::chrono::steady_clock::now() > until) throw std::runtime_error("rxe has no GID for " + ip_);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

ExtraAddress::~ExtraAddress() {
    const char* netdev = std::getenv("RXE_NETDEV");
    const std::string cmd = addr_command(ip_, "del", netdev != nullptr ? netdev : "rxenet0");
    (void)std::system(cmd.c_str());
}

double warm_up_rdma_libraries() {
    const auto before = std::chrono::steady_clock::now();
    transport::Error err;
    if (!transport::rdma_usable(transport::Settings{}, transport::SetupSide::Listening, err)) throw std::runtime_error(err.message);
    protocol::Nonce nonce{};
    if (!protocol::generate_nonce(nonce)) throw std::runtime_error("generate_nonce failed");
    const sockaddr_in at = rdma_address(0);
    if (!transport::Listener::create(reinterpret_cast<const sockaddr*>(&at), transport::Settings{}, err))
        throw std::runtime_error(err.message);
    return ms_between(before, std::chrono::steady_clock::now());
}

Held held_now() {
    Held h;
    const int entries = transport::count_entries("/proc/self/fd");
    if (entries < 0) throw std::runtime_error("cannot open /proc/self/fd");
    h.descriptors = entries - 1;  // the directory's own
    h.pinned = transport::pinned_bytes_in_process();
    return h;
}

std::string to_string(const Held& h) {
    return std::to_string(h.descriptors) + " descriptors, " + std::to_string(h.pinned) + " pinned bytes";
}

}  // namespace pg_rdma::test
