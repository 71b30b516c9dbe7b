// The names of the upgrade's outcomes (see tcp_upgrade.hpp; each side's
// steps, blocking form and stage names are in upgrade_client.cpp and
// upgrade_server.cpp).
#include "transport/tcp_upgrade.hpp"

namespace pg_rdma::transport {

const char* to_string(UpgradeOutcome o) noexcept {
    switch (o) {
        case UpgradeOutcome::Rdma: return "rdma";
        case UpgradeOutcome::TcpSame: return "tcp";
        case UpgradeOutcome::TcpReconnect: return "tcp-reconnect";
        case UpgradeOutcome::Failed: return "failed";
    }
    return "?";
}

}  // namespace pg_rdma::transport
