#include "transport/cm_events.hpp"

#include "transport/event_set.hpp"
#include "transport/provider_preload.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

namespace pg_rdma::transport {
namespace {

// Descriptors librdmacm and libibverbs open for themselves during a setup
// (the first one opens the rdma_cm device and every verbs device; later
// ones transient descriptors): measured with rxe, where 7 spare still
// failed in rdma_connect without a useful errno.
constexpr int kLibraryDescriptors = 4;

// The process that first made an event channel, with which librdmacm opens
// its descriptors, and whether this process is a fork of it (or of one of
// its descendants): set by the fork handler below, in the child, before
// any of the child's own code runs.
std::atomic<pid_t> g_rdmacm_user{0};
std::atomic<bool> g_rdmacm_inherited{false};

void mark_inherited_after_fork() {
    if (g_rdmacm_user.load(std::memory_order_relaxed) != 0) g_rdmacm_inherited.store(true, std::memory_order_relaxed);
}

// Registered when the library is loaded, before the program can fork.
[[maybe_unused]] const bool g_fork_handler_registered =
    pthread_atfork(nullptr, nullptr, &mark_inherited_after_fork) == 0;

}  // namespace

bool verbs_inherited_from_parent() noexcept { return g_rdmacm_inherited.load(std::memory_order_relaxed); }

bool rdma_setup_possible(SetupSide side, Error& err) noexcept {
    if (side == SetupSide::Connecting || !verbs_inherited_from_parent()) return true;
    return fail(err, EOPNOTSUPP,
                fmt::format("an RDMA listener cannot be set up in this process: it was forked from process {} (or "
                            "a descendant of it) after that process had used RDMA, and librdmacm keeps the device "
                            "descriptors it opened there, which a forked process cannot use. Listen in a process "
                            "forked before any RDMA use, or exec after fork",
                            g_rdmacm_user.load(std::memory_order_relaxed)));
}

namespace {

// RC retransmissions before a send fails (the 3-bit maximum): a lost packet
// is retried, a vanished peer surfaces as IBV_WC_RETRY_EXC_ERR.
constexpr std::uint8_t kRetryCount = 7;
// Finite RNR retries: credits make RNR impossible, so one means a bug and
// must end as an error, never as the endless retry 7 would mean.
constexpr std::uint8_t kRnrRetryCount = 3;
// The local ACK timeout, 4.096 us x 2^N: 15 is 134 ms, so a lost packet
// that no later one reveals (the last of a burst, an ACK) costs 134 ms
// instead of rdma_cm's half second or more on RoCE, and a link that is gone fails the
// sends after (kRetryCount + 1) x 134 ms = 1.07 s, where the session moves
// onto TCP (transport/stream_failover.cpp). Far above any RDMA round
// trip inside a data centre, and above the stalls of an emulated guest.
constexpr std::uint8_t kAckTimeoutExponent = 15;

}  // namespace

CmChannelPtr make_cm_channel(SetupSide side, Error& err) {
    // Every setup starts here: check the descriptors for the whole
    // connection, and librdmacm's own, up front.
    if (!rdma_setup_possible(side, err)) return nullptr;
    const int own_context = verbs_inherited_from_parent() ? kOwnContextDescriptors : 0;
    if (!check_descriptor_headroom(kDescriptorsPerConnection + kLibraryDescriptors + own_context, err)) return nullptr;
    preload_device_providers();  // before librdmacm's first device scan
    CmChannelPtr channel(rdma_create_event_channel());
    if (!channel) {
        fail_errno(err, errno != 0 ? errno : ENODEV, "rdma_create_event_channel");
        return nullptr;
    }
    pid_t nobody = 0;
    g_rdmacm_user.compare_exchange_strong(nobody, getpid(), std::memory_order_relaxed);
    const int flags = fcntl(channel->fd, F_GETFL);
    if (flags < 0 || fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK) != 0) {
        fail_errno(err, errno, "fcntl(rdma_cm channel, O_NONBLOCK)");
        return nullptr;
    }
    return channel;
}

bool take_cm_event(rdma_event_channel* channel, CmEventPtr& event, Error& err) {
    event.reset();
    for (;;) {
        rdma_cm_event* raw = nullptr;
        if (rdma_get_cm_event(channel, &raw) == 0) {
            event.reset(raw);
            return true;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
        if (errno != EINTR) return fail_errno(err, errno, "rdma_get_cm_event");
    }
}

bool unexpected_cm_event(const rdma_cm_event& event, rdma_cm_event_type expected, const std::string& what,
                         Error& err) {
    int code = ECONNREFUSED;
    if (event.event == RDMA_CM_EVENT_ADDR_ERROR || event.event == RDMA_CM_EVENT_ROUTE_ERROR ||
        event.event == RDMA_CM_EVENT_UNREACHABLE)
        code = EHOSTUNREACH;
    return fail(err, code,
                fmt::format("{}: got {} (status {}) instead of {}", what, rdma_event_str(event.event), event.status,
                            rdma_event_str(expected)));
}

bool cm_timeout(rdma_cm_event_type awaited, const std::string& what, Error& err) {
    return fail(err, ETIMEDOUT, fmt::format("{}: timed out waiting for {}", what, rdma_event_str(awaited)));
}

CmEventPtr next_cm_event(rdma_event_channel* channel, Deadline deadline, const char* awaited, Error& err) {
    for (;;) {
        CmEventPtr event;
        if (!take_cm_event(channel, event, err)) return nullptr;
        if (event) return event;
        if (passed(deadline)) {
            fail(err, ETIMEDOUT, fmt::format("timed out waiting for {}", awaited));
            return nullptr;
        }
        if (!wait_for(Want::one(channel->fd, POLLIN), deadline, err)) return nullptr;
    }
}

bool expect_cm_event(rdma_event_channel* channel, rdma_cm_event_type expected, Deadline deadline,
                     const std::string& what, Error& err) {
    const CmEventPtr event = next_cm_event(channel, deadline, rdma_event_str(expected), err);
    if (!event) {
        err.message = what + ": " + err.message;
        return false;
    }
    return event->event == expected || unexpected_cm_event(*event, expected, what, err);
}

void set_ack_timeout(rdma_cm_id* id) noexcept {
    std::uint8_t exponent = kAckTimeoutExponent;
    (void)rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &exponent, sizeof exponent);
}

rdma_conn_param connection_parameters() {
    rdma_conn_param p{};
    p.responder_resources = 0;  // no RDMA READ in this protocol
    p.initiator_depth = 0;
    p.retry_count = kRetryCount;
    p.rnr_retry_count = kRnrRetryCount;
    return p;
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
