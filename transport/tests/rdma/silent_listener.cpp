// silent_listener IP: an rdma_cm listener on IP (port chosen by the kernel)
// that never accepts: a connection request sent to it gets no answer, as
// when a firewall drops RoCE on the way back. Prints the port, then waits
// until killed. For shell-level tests of a client's bounded RDMA setup.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdio>

#include "transport/rdma_setup.hpp"

namespace transport = pg_rdma::transport;

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: silent_listener IP\n");
        return 2;
    }
    sockaddr_in at{};
    at.sin_family = AF_INET;
    if (inet_pton(AF_INET, argv[1], &at.sin_addr) != 1) {
        std::fprintf(stderr, "silent_listener: not an IPv4 address: %s\n", argv[1]);
        return 2;
    }
    transport::Error err;
    auto listener = transport::Listener::create(reinterpret_cast<const sockaddr*>(&at), transport::Settings{}, err);
    if (!listener) {
        std::fprintf(stderr, "silent_listener: %s\n", err.message.c_str());
        return 1;
    }
    const sockaddr_storage bound = listener->local_address();
    std::printf("%u\n", ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port));
    std::fflush(stdout);
    for (;;) pause();
}
