#include "transport/upgrade_io.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>

namespace pg_rdma::transport {

IoStatus send_some(int fd, const TcpIo& io, std::span<const std::uint8_t> bytes, std::size_t& done, Error& err) {
    while (done < bytes.size()) {
        const ssize_t w = io.send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            done += static_cast<std::size_t>(w);
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return IoStatus::Wait;
        } else if (w < 0 && errno != EINTR) {
            fail_errno(err, errno, "send(TCP socket)");
            return IoStatus::Failed;
        }
    }
    return IoStatus::Done;
}

IoStatus recv_some(int fd, const TcpIo& io, std::span<std::uint8_t> bytes, std::size_t& done, Error& err) {
    while (done < bytes.size()) {
        const ssize_t r = io.recv(fd, bytes.data() + done, bytes.size() - done, MSG_DONTWAIT);
        if (r > 0) {
            done += static_cast<std::size_t>(r);
        } else if (r == 0) {
            fail(err, ECONNRESET, "the server closed the TCP connection during the RDMA upgrade");
            return IoStatus::Failed;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return IoStatus::Wait;
        } else if (errno != EINTR) {
            fail_errno(err, errno, "recv(TCP socket)");
            return IoStatus::Failed;
        }
    }
    return IoStatus::Done;
}

bool tcp_addresses(int fd, sockaddr_storage& local, sockaddr_storage& peer, Error& err) {
    socklen_t len = sizeof local;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) return fail_errno(err, errno, "getsockname");
    len = sizeof peer;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return fail_errno(err, errno, "getpeername");
    if (local.ss_family == AF_INET6) {  // a dual-stack socket: IPv4 peers appear as ::ffff:a.b.c.d
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&local);
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
            sockaddr_in in{};
            in.sin_family = AF_INET;
            std::memcpy(&in.sin_addr, &in6->sin6_addr.s6_addr[12], 4);
            local = {};
            std::memcpy(&local, &in, sizeof in);
        }
    }
    if (local.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&local)->sin_port = 0;
    else if (local.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&local)->sin6_port = 0;
    else return fail(err, EAFNOSUPPORT, "RDMA sessions need an IP connection");
    return true;
}

sockaddr_storage endpoint_address(const protocol::RdmaEndpoint& ep) {
    sockaddr_storage out{};
    if (ep.family == 4) {
        auto* in = reinterpret_cast<sockaddr_in*>(&out);
        in->sin_family = AF_INET;
        in->sin_port = htons(ep.port);
        std::memcpy(&in->sin_addr, ep.address.data(), 4);
    } else {
        auto* in6 = reinterpret_cast<sockaddr_in6*>(&out);
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(ep.port);
        std::memcpy(&in6->sin6_addr, ep.address.data(), 16);
    }
    return out;
}

protocol::RdmaEndpoint describe_endpoint(const sockaddr_storage& bound, const protocol::Nonce& nonce) {
    protocol::RdmaEndpoint ep;
    ep.nonce = nonce;
    if (bound.ss_family == AF_INET) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(&bound);
        ep.family = 4;
        ep.port = ntohs(in->sin_port);
        std::memcpy(ep.address.data(), &in->sin_addr, 4);
    } else {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&bound);
        ep.family = 6;
        ep.port = ntohs(in6->sin6_port);
        std::memcpy(ep.address.data(), &in6->sin6_addr, 16);
    }
    return ep;
}

}  // namespace pg_rdma::transport
