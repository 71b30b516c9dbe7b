// The idle-peer scenario at the default settings (keepalive every 2 s,
// 20 s timeout) for 3 minutes: the measured defect killed such a session
// after 179 s. Tagged rdma-background: it sleeps, so the guest runs it beside
// the other tests.
#include "idle_peer.hpp"

using namespace pg_rdma::test;

TEST_CASE("a live peer that does not call in for 3 minutes at default settings is not declared dead",
          "[rdma][liveness][long]") {
    check_idle_peer_survives(Settings{}, 185s);
}
