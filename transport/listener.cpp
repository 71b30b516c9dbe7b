// The listening side of rdma_setup.hpp: Listener. In a file of its own so
// that a program that only connects (libpq_rdma.so) does not link it, nor
// the Acceptor it runs, nor libcrypto through that.
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "transport/cm_events.hpp"
#include "transport/rdma_setup.hpp"

namespace pg_rdma::transport {
namespace {

constexpr int kListenBacklog = 16;  // pending connection requests

}  // namespace

// The listening rdma_cm id and its event channel. Members in creation order.
class CmListener {
public:
    CmChannelPtr channel;
    CmIdPtr id;
};

Listener::Listener(std::unique_ptr<CmListener> cm, const Settings& settings)
    : cm_(std::move(cm)), settings_(settings) {}

Listener::~Listener() = default;

std::unique_ptr<Listener> Listener::create(const sockaddr* addr, const Settings& settings, Error& err) noexcept {
    try {
        if (!check_settings(settings, err)) return nullptr;
        auto cm = std::make_unique<CmListener>();
        cm->channel = make_cm_channel(SetupSide::Listening, err);
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
            fail(err, ENODEV,
                 fmt::format("rdma_bind_addr({}): the address is not on an RDMA device", format_address(addr)));
            return nullptr;
        }
        if (rdma_listen(cm->id.get(), kListenBacklog) != 0) {
            fail_errno(err, errno, fmt::format("rdma_listen({})", format_address(addr)));
            return nullptr;
        }
        return std::unique_ptr<Listener>(new Listener(std::move(cm), settings));
    } catch (...) {
        fail_from_exception(err, "Listener::create");
        return nullptr;
    }
}

sockaddr_storage Listener::local_address() const noexcept {
    sockaddr_storage out{};
    const sockaddr* a = rdma_get_local_addr(cm_->id.get());
    std::memcpy(&out, a, a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
    return out;
}

int Listener::fd() const noexcept { return cm_->channel->fd; }

rdma_event_channel* Listener::cm_channel() const noexcept { return cm_->channel.get(); }

std::unique_ptr<Connection> Listener::accept(const protocol::Nonce& nonce, const sockaddr* expected_peer,
                                             Error& err) noexcept {
    return accept(nonce, expected_peer, SetupClock::now() + settings_.connect_timeout, err);
}

std::unique_ptr<Connection> Listener::accept(const protocol::Nonce& nonce, const sockaddr* expected_peer,
                                             Deadline deadline, Error& err) noexcept {
    auto acceptor = Acceptor::start(*this, nonce, expected_peer, deadline, err);
    if (!acceptor) return nullptr;
    try {
        return run_setup_to_end(*acceptor, err);
    } catch (...) {
        fail_from_exception(err, "Listener::accept");
        return nullptr;
    }
}

}  // namespace pg_rdma::transport
