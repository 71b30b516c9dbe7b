#include "transport/cm_events.hpp"

#include "transport/event_set.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace pg_rdma::transport {
namespace {

// Descriptors librdmacm and libibverbs open for themselves during a setup
// (the first one opens the rdma_cm device and every verbs device; later
// ones transient descriptors): measured with rxe, where 7 spare still
// failed in rdma_connect without a useful errno.
constexpr int kLibraryDescriptors = 4;

}  // namespace

int ms_until(SetupClock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SetupClock::now());
    return static_cast<int>(std::max<std::int64_t>(left.count(), 0));
}

CmChannelPtr make_cm_channel(Error& err) {
    // Every setup starts here: check the descriptors for the whole
    // connection, and librdmacm's own, up front.
    if (!check_descriptor_headroom(kDescriptorsPerConnection + kLibraryDescriptors, err)) return nullptr;
    CmChannelPtr channel(rdma_create_event_channel());
    if (!channel) {
        fail_errno(err, errno != 0 ? errno : ENODEV, "rdma_create_event_channel");
        return nullptr;
    }
    const int flags = fcntl(channel->fd, F_GETFL);
    if (flags < 0 || fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK) != 0) {
        fail_errno(err, errno, "fcntl(rdma_cm channel, O_NONBLOCK)");
        return nullptr;
    }
    return channel;
}

CmEventPtr next_cm_event(rdma_event_channel* channel, SetupClock::time_point deadline,
                         const char* awaited, Error& err) {
    for (;;) {
        rdma_cm_event* raw = nullptr;
        if (rdma_get_cm_event(channel, &raw) == 0) return CmEventPtr(raw);
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            fail_errno(err, errno, "rdma_get_cm_event");
            return nullptr;
        }
        pollfd p{channel->fd, POLLIN, 0};
        const int rc = poll(&p, 1, ms_until(deadline));
        if (rc == 0) {
            fail(err, ETIMEDOUT, fmt::format("timed out waiting for {}", awaited));
            return nullptr;
        }
        if (rc < 0 && errno != EINTR) {
            fail_errno(err, errno, "poll(rdma_cm channel)");
            return nullptr;
        }
    }
}

bool expect_cm_event(rdma_event_channel* channel, rdma_cm_event_type expected,
                     SetupClock::time_point deadline, const std::string& what, Error& err) {
    const CmEventPtr event = next_cm_event(channel, deadline, rdma_event_str(expected), err);
    if (!event) {
        err.message = what + ": " + err.message;
        return false;
    }
    if (event->event == expected) return true;
    int code = ECONNREFUSED;
    if (event->event == RDMA_CM_EVENT_ADDR_ERROR || event->event == RDMA_CM_EVENT_ROUTE_ERROR ||
        event->event == RDMA_CM_EVENT_UNREACHABLE)
        code = EHOSTUNREACH;
    return fail(err, code,
                fmt::format("{}: got {} (status {}) instead of {}", what, rdma_event_str(event->event),
                            event->status, rdma_event_str(expected)));
}

std::string format_address(const sockaddr* addr) {
    char host[INET6_ADDRSTRLEN] = "?";
    if (addr->sa_family == AF_INET) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        return fmt::format("{}:{}", host, ntohs(in->sin_port));
    }
    if (addr->sa_family == AF_INET6) {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        return fmt::format("[{}]:{}", host, ntohs(in6->sin6_port));
    }
    return fmt::format("(address family {})", addr->sa_family);
}

namespace {

// The 16-byte IPv6 form of an IP address (IPv4 as ::ffff:a.b.c.d).
bool ip6_form(const sockaddr* a, in6_addr& out) {
    if (a->sa_family == AF_INET6) {
        out = reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr;
        return true;
    }
    if (a->sa_family != AF_INET) return false;
    std::memset(&out, 0, sizeof out);
    out.s6_addr[10] = 0xff;
    out.s6_addr[11] = 0xff;
    std::memcpy(&out.s6_addr[12], &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, 4);
    return true;
}

}  // namespace

bool same_ip(const sockaddr* a, const sockaddr* b) {
    in6_addr x{}, y{};
    return ip6_form(a, x) && ip6_form(b, y) && std::memcmp(&x, &y, sizeof x) == 0;
}

}  // namespace pg_rdma::transport
