// Active and passive connection setup over librdmacm (see rdma_setup.hpp).
#include "transport/rdma_setup.hpp"

#include <openssl/crypto.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "transport/cm_events.hpp"
#include "transport/endpoint.hpp"
#include "transport/stream.hpp"

namespace pg_rdma::transport {
namespace {

constexpr int kListenBacklog = 16;       // pending connection requests
// RC retransmissions before a send fails (the 3-bit maximum): a lost packet
// is retried, a vanished peer surfaces as IBV_WC_RETRY_EXC_ERR.
constexpr std::uint8_t kRetryCount = 7;
// Finite RNR retries: credits make RNR impossible, so one means a bug and
// must end as an error, never as the endless retry 7 would mean.
constexpr std::uint8_t kRnrRetryCount = 3;

rdma_conn_param connection_parameters() {
    rdma_conn_param p{};
    p.responder_resources = 0;  // no RDMA READ in this protocol
    p.initiator_depth = 0;
    p.retry_count = kRetryCount;
    p.rnr_retry_count = kRnrRetryCount;
    return p;
}

std::unique_ptr<Connection> finish(std::unique_ptr<Endpoint> ep, Role role, SetupClock::time_point deadline,
                                   Error& err) {
    auto stream = Stream::establish(std::move(ep), role, deadline, err);
    if (!stream) return nullptr;
    return std::make_unique<Connection>(std::move(stream));
}

}  // namespace

// The listening rdma_cm id and its event channel. Members in creation order.
class CmListener {
public:
    CmChannelPtr channel;
    CmIdPtr id;
};

bool rdma_usable(const Settings& settings, Error& err) {
    int count = 0;
    ibv_device** list = ibv_get_device_list(&count);
    if (list != nullptr) ibv_free_device_list(list);
    if (count <= 0)
        return fail(err, ENODEV,
                    "no RDMA device found (ibv_get_device_list returned none): load the NIC's "
                    "driver, or for Soft-RoCE run 'rdma link add rxe0 type rxe netdev <if>'");
    return check_memlock(Endpoint::pinned_bytes(settings), err);
}

std::unique_ptr<Connection> connect(const sockaddr* dst, const protocol::Nonce& nonce, const Settings& settings,
                                    Error& err) {
    const auto deadline = SetupClock::now() + settings.connect_timeout;
    const std::string where = format_address(dst);
    CmChannelPtr channel = make_cm_channel(err);
    if (!channel) return nullptr;
    rdma_cm_id* raw = nullptr;
    if (rdma_create_id(channel.get(), &raw, nullptr, RDMA_PS_TCP) != 0) {
        fail_errno(err, errno, "rdma_create_id");
        return nullptr;
    }
    CmIdPtr id(raw);
    if (rdma_resolve_addr(id.get(), nullptr, const_cast<sockaddr*>(dst), ms_until(deadline)) != 0) {
        fail_errno(err, errno, fmt::format("rdma_resolve_addr({})", where));
        return nullptr;
    }
    if (!expect_cm_event(channel.get(), RDMA_CM_EVENT_ADDR_RESOLVED, deadline,
                         fmt::format("rdma_resolve_addr({}): no RDMA device routes to it", where), err))
        return nullptr;
    if (rdma_resolve_route(id.get(), ms_until(deadline)) != 0) {
        fail_errno(err, errno, fmt::format("rdma_resolve_route({})", where));
        return nullptr;
    }
    if (!expect_cm_event(channel.get(), RDMA_CM_EVENT_ROUTE_RESOLVED, deadline,
                         fmt::format("rdma_resolve_route({})", where), err))
        return nullptr;

    auto ep = Endpoint::create(std::move(channel), std::move(id), settings, err);
    if (!ep) return nullptr;
    const auto private_data = protocol::encode_connect_private_data(nonce);
    rdma_conn_param param = connection_parameters();
    param.private_data = private_data.data();
    param.private_data_len = static_cast<std::uint8_t>(private_data.size());
    if (rdma_connect(ep->id(), &param) != 0) {
        fail_errno(err, errno, fmt::format("rdma_connect({})", where));
        return nullptr;
    }
    if (!expect_cm_event(ep->cm_channel(), RDMA_CM_EVENT_ESTABLISHED, deadline,
                         fmt::format("rdma_connect({}): the peer did not accept (wrong nonce or address?)", where),
                         err))
        return nullptr;
    return finish(std::move(ep), Role::Active, deadline, err);
}

Listener::Listener(std::unique_ptr<CmListener> cm, const Settings& settings)
    : cm_(std::move(cm)), settings_(settings) {}

Listener::~Listener() = default;

std::unique_ptr<Listener> Listener::create(const sockaddr* addr, const Settings& settings, Error& err) {
    auto cm = std::make_unique<CmListener>();
    cm->channel = make_cm_channel(err);
    if (!cm->channel) return nullptr;
    rdma_cm_id* raw = nullptr;
    if (rdma_create_id(cm->channel.get(), &raw, nullptr, RDMA_PS_TCP) != 0) {
        fail_errno(err, errno, "rdma_create_id");
        return nullptr;
    }
    cm->id.reset(raw);
    if (rdma_bind_addr(cm->id.get(), const_cast<sockaddr*>(addr)) != 0) {
        fail_errno(err, errno, fmt::format("rdma_bind_addr({})", format_address(addr)));
        return nullptr;
    }
    if (cm->id->verbs == nullptr) {
        fail(err, ENODEV, fmt::format("rdma_bind_addr({}): the address is not on an RDMA device", format_address(addr)));
        return nullptr;
    }
    if (rdma_listen(cm->id.get(), kListenBacklog) != 0) {
        fail_errno(err, errno, fmt::format("rdma_listen({})", format_address(addr)));
        return nullptr;
    }
    return std::unique_ptr<Listener>(new Listener(std::move(cm), settings));
}

sockaddr_storage Listener::local_address() const {
    sockaddr_storage out{};
    const sockaddr* a = rdma_get_local_addr(cm_->id.get());
    std::memcpy(&out, a, a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
    return out;
}

int Listener::fd() const { return cm_->channel->fd; }

namespace {

// Why a connection request must be refused, or empty if it is the one awaited.
std::string judge_request(const rdma_cm_event& event, const protocol::Nonce& nonce, const sockaddr* expected_peer) {
    const auto decoded = protocol::decode_connect_private_data(
        {static_cast<const std::uint8_t*>(event.param.conn.private_data), event.param.conn.private_data_len});
    if (!decoded.is_ok()) return fmt::format("malformed private data ({})", decoded.error);
    if (CRYPTO_memcmp(decoded.value.data(), nonce.data(), nonce.size()) != 0) return "wrong nonce";
    const sockaddr* from = rdma_get_peer_addr(event.id);
    if (expected_peer != nullptr && !same_ip(from, expected_peer))
        return fmt::format("came from {} but {} was expected", format_address(from), format_address(expected_peer));
    return {};
}

}  // namespace

std::unique_ptr<Connection> Listener::accept(const protocol::Nonce& nonce, const sockaddr* expected_peer,
                                             Error& err) {
    const auto deadline = SetupClock::now() + settings_.connect_timeout;
    std::string last_refusal;
    for (;;) {
        CmEventPtr event = next_cm_event(cm_->channel.get(), deadline, "an RDMA connection request", err);
        if (!event) {
            if (!last_refusal.empty()) err.message += "; refused a request: " + last_refusal;
            return nullptr;
        }
        if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) continue;
        CmIdPtr child(event->id);
        last_refusal = judge_request(*event, nonce, expected_peer);
        event.reset();  // acknowledged: rdma_migrate_id waits for that
        if (!last_refusal.empty()) {
            rdma_reject(child.get(), nullptr, 0);
            continue;
        }
        CmChannelPtr channel = make_cm_channel(err);
        if (!channel) return nullptr;
        if (rdma_migrate_id(child.get(), channel.get()) != 0) {
            fail_errno(err, errno, "rdma_migrate_id");
            return nullptr;
        }
        auto ep = Endpoint::create(std::move(channel), std::move(child), settings_, err);
        if (!ep) return nullptr;
        rdma_conn_param param = connection_parameters();
        if (rdma_accept(ep->id(), &param) != 0) {
            fail_errno(err, errno, "rdma_accept");
            return nullptr;
        }
        if (!expect_cm_event(ep->cm_channel(), RDMA_CM_EVENT_ESTABLISHED, deadline, "rdma_accept", err))
            return nullptr;
        return finish(std::move(ep), Role::Passive, deadline, err);
    }
}

}  // namespace pg_rdma::transport
