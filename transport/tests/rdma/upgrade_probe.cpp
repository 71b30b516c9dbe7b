// upgrade_probe HOST PORT prefer|require [HOLD_SECONDS]: opens a TCP
// connection, asks for the RDMA upgrade and prints the outcome and why, for
// shell-level tests against real servers; with HOLD_SECONDS it then keeps
// the session that long without a word (a client that never sends its
// startup packet). Exit status: 0 rdma, 1 tcp, 2 tcp-reconnect, 3 failed,
// 4 usage or TCP connect error.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "transport/tcp_upgrade.hpp"

namespace transport = pg_rdma::transport;

int main(int argc, char** argv) {
    constexpr int kUsage = 4;
    if ((argc != 4 && argc != 5) || (std::strcmp(argv[3], "prefer") != 0 && std::strcmp(argv[3], "require") != 0)) {
        std::fprintf(stderr, "usage: upgrade_probe HOST PORT prefer|require [HOLD_SECONDS]\n");
        return kUsage;
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(std::atoi(argv[2])));
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1 ||
        connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        std::perror("upgrade_probe: connect");
        return kUsage;
    }
    const auto mode = std::strcmp(argv[3], "prefer") == 0 ? transport::Mode::Prefer : transport::Mode::Require;
    const auto result = transport::upgrade_client(fd, mode, transport::Settings{});
    std::printf("%s: %s\n", transport::to_string(result.outcome), result.error.message.c_str());
    std::fflush(stdout);
    if (argc == 5) sleep(static_cast<unsigned>(std::atoi(argv[4])));
    close(fd);
    return static_cast<int>(result.outcome);
}
