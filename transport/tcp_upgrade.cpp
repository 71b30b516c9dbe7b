// The blocking forms of the upgrade and the names of its states (see
// tcp_upgrade.hpp; the steps are in upgrade_client.cpp and upgrade_server.cpp).
#include "transport/tcp_upgrade.hpp"

#include "transport/acceptor.hpp"
#include "transport/connector.hpp"
#include "transport/rdma_setup.hpp"

namespace pg_rdma::transport {
namespace {

template <class Upgrade>
UpgradeResult run_to_end(Upgrade& upgrade) noexcept {
    while (upgrade.step() == StepStatus::InProgress) {
        Error err;
        if (!wait_for(upgrade.want(), upgrade.deadline(), err)) {
            UpgradeResult failed;
            failed.error = std::move(err);
            return failed;
        }
    }
    return upgrade.take_result();
}

}  // namespace

UpgradeResult upgrade_client(int tcp_fd, Mode mode, const Settings& settings, const TcpIo& io) noexcept {
    ClientUpgrade upgrade(tcp_fd, mode, settings, io);
    return run_to_end(upgrade);
}

UpgradeResult upgrade_server(int tcp_fd, const Settings& settings, const TcpIo& io) noexcept {
    ServerUpgrade upgrade(tcp_fd, settings, io);
    return run_to_end(upgrade);
}

const char* to_string(UpgradeOutcome o) noexcept {
    switch (o) {
        case UpgradeOutcome::Rdma: return "rdma";
        case UpgradeOutcome::TcpSame: return "tcp";
        case UpgradeOutcome::TcpReconnect: return "tcp-reconnect";
        case UpgradeOutcome::Failed: return "failed";
    }
    return "?";
}

const char* to_string(ClientUpgrade::Stage stage) noexcept {
    switch (stage) {
        case ClientUpgrade::Stage::SendingRequest: return "sending the request";
        case ClientUpgrade::Stage::AwaitingReply: return "awaiting the reply";
        case ClientUpgrade::Stage::Connecting: return "connecting over RDMA";
        case ClientUpgrade::Stage::Done: return "done";
    }
    return "?";
}

const char* to_string(ServerUpgrade::Stage stage) noexcept {
    switch (stage) {
        case ServerUpgrade::Stage::Replying: return "replying";
        case ServerUpgrade::Stage::AwaitingClient: return "awaiting the client's RDMA connection";
        case ServerUpgrade::Stage::Done: return "done";
    }
    return "?";
}

}  // namespace pg_rdma::transport
