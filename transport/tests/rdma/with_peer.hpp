// The shape most RDMA tests share: a forked peer connects to a connection
// this process accepts; each side runs its body; the peer must exit 0.
#pragma once

#include "testing/catch.hpp"

#include <cstdio>

#include "peer_process.hpp"

namespace pg_rdma::test {

// `child(Connection&) -> int` runs in the peer (its exit status);
// `parent(Connection&, PeerProcess&)` runs here. A parent that waits for the
// peer itself (to see a signal, say) takes over that check.
template <class ChildBody, class ParentBody>
void with_peer(const Settings& settings, ChildBody child, ParentBody parent) {
    Pipe port_pipe;
    PeerProcess peer([&]() -> int {
        std::string error;
        auto conn = connect_to_parent(port_pipe, settings, error);
        if (!conn) {
            std::fprintf(stderr, "peer: connect failed: %s\n", error.c_str());
            return 90;
        }
        return child(*conn);
    });
    Rendezvous rendezvous(port_pipe, settings);
    parent(*rendezvous.accept(), peer);
    if (peer.running()) CHECK(peer.wait() == 0);
}

}  // namespace pg_rdma::test
