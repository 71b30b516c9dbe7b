// The listening side and the blocking wrappers over the setup steps (see
// rdma_setup.hpp).
#include "transport/rdma_setup.hpp"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "transport/cm_events.hpp"
#include "transport/endpoint.hpp"

namespace pg_rdma::transport {
namespace {

constexpr int kListenBacklog = 16;  // pending connection requests

// Steps `setup` (a Connector or an Acceptor) to its end, waiting on its
// descriptors in between.
template <class Setup>
std::unique_ptr<Connection> run_to_end(Setup& setup, Error& err) {
    for (;;) {
        switch (setup.step(err)) {
            case StepStatus::Done: return setup.take_connection();
            case StepStatus::Failed: return nullptr;
            case StepStatus::InProgress: break;
        }
        if (!wait_for(setup.want(), setup.deadline(), err)) return nullptr;
    }
}

}  // namespace

// The listening rdma_cm id and its event channel. Members in creation order.
class CmListener {
public:
    CmChannelPtr channel;
    CmIdPtr id;
};

bool rdma_usable(const Settings& settings, SetupSide side, Error& err) noexcept {
    try {
        if (!check_settings(settings, err) || !rdma_setup_possible(side, err)) return false;
        int count = 0;
        ibv_device** list = ibv_get_device_list(&count);
        if (list != nullptr) ibv_free_device_list(list);
        if (count <= 0)
            return fail(err, ENODEV,
                        "no RDMA device found (ibv_get_device_list returned none): load the NIC's "
                        "driver, or for Soft-RoCE run 'rdma link add rxe0 type rxe netdev <if>'");
        return check_memlock(Endpoint::pinned_bytes(settings), err);
    } catch (...) {
        fail_from_exception(err, "rdma_usable");
        return false;
    }
}

std::unique_ptr<Connection> connect(const sockaddr* dst, const protocol::Nonce& nonce, const Settings& settings,
                                    Error& err) noexcept {
    const Deadline deadline = SetupClock::now() + settings.connect_timeout;
    auto connector = Connector::start(dst, nullptr, nonce, settings, deadline, err);
    if (!connector) return nullptr;
    try {
        return run_to_end(*connector, err);
    } catch (...) {
        fail_from_exception(err, "connect");
        return nullptr;
    }
}

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
        return run_to_end(*acceptor, err);
    } catch (...) {
        fail_from_exception(err, "Listener::accept");
        return nullptr;
    }
}

}  // namespace pg_rdma::transport
