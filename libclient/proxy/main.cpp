// pgrdma proxy: a local sidecar for programs whose sockets do not go
// through the C library (Go's pgx, static binaries), so that libpq_rdma.so
// cannot reach them. They connect to the proxy on a Unix socket or a
// loopback port; the proxy, run under libpq_rdma.so by `pgrdma proxy`,
// carries each connection to the server (relay.hpp). One thread per
// connection: the upgrade's handshake runs inside the first write to the
// server, and must hold up only its own connection.
#include <dlfcn.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "libclient/proxy/listeners.hpp"
#include "libclient/proxy/options.hpp"
#include "libclient/proxy/refusal.hpp"
#include "libclient/proxy/relay.hpp"

namespace {

using namespace pg_rdma::proxy;

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
// While it waits for the last sessions after a first SIGTERM, how often the
// proxy looks at their count, in milliseconds.
constexpr int kDrainPollMs = 200;

std::atomic<unsigned> g_active{0};

// Whether connect() here is libpq_rdma.so's: without it the proxy would
// carry every connection over TCP and look as if it worked.
bool client_library_loaded()
{
    Dl_info info{};
    return ::dladdr(reinterpret_cast<void*>(&::connect), &info) != 0 && info.dli_fname != nullptr &&
           std::strstr(info.dli_fname, "libpq_rdma") != nullptr;
}

std::string client_label(const sockaddr_storage& peer, unsigned long number)
{
    std::string label = "connection " + std::to_string(number);
    char text[INET6_ADDRSTRLEN] = "";
    if (peer.ss_family == AF_INET) {
        const auto* v4 = reinterpret_cast<const sockaddr_in*>(&peer);
        ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
        return label + " from " + text + ":" + std::to_string(ntohs(v4->sin_port));
    }
    if (peer.ss_family == AF_INET6) {
        const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&peer);
        ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
        return label + " from [" + text + "]:" + std::to_string(ntohs(v6->sin6_port));
    }
    return label + " (local socket)";
}

void start_session(int client, const RelaySettings& settings, unsigned max_connections, std::string label)
{
    if (g_active.load() >= max_connections) {
        refuse_at_once(client, kSqlStateTooManyConnections,
                       "pgrdma proxy: too many connections (--max-connections is " +
                           std::to_string(max_connections) + ")");
        std::fprintf(stderr, "pgrdma proxy: %s: refused, %u sessions open (--max-connections)\n", label.c_str(),
                     max_connections);
        ::close(client);
        return;
    }
    ++g_active;
    try {
        std::thread([client, &settings, label = std::move(label)] {
            carry(client, settings, label);
            --g_active;
        }).detach();
    } catch (const std::system_error& e) {
        --g_active;
        refuse_at_once(client, kSqlStateTooManyConnections, std::string("pgrdma proxy: no thread: ") + e.what());
        ::close(client);
    }
}

// Accepts until a signal asks to stop; true when it was asked twice (end
// the sessions now).
bool serve(const Listeners& listeners, int signals, const RelaySettings& settings, unsigned max_connections)
{
    std::vector<pollfd> pfd;
    pfd.push_back({signals, POLLIN, 0});
    for (int fd : listeners.fds())
        pfd.push_back({fd, POLLIN, 0});
    unsigned long accepted = 0;
    for (;;) {
        if (::poll(pfd.data(), pfd.size(), -1) < 0) {
            if (errno == EINTR)
                continue;
            std::fprintf(stderr, "pgrdma proxy: poll: %s\n", std::strerror(errno));
            return true;
        }
        if (pfd[0].revents & POLLIN) {
            signalfd_siginfo info{};
            if (::read(signals, &info, sizeof info) == sizeof info)
                return false;
        }
        for (std::size_t i = 1; i < pfd.size(); ++i) {
            if (!(pfd[i].revents & POLLIN))
                continue;
            sockaddr_storage peer{};
            socklen_t len = sizeof peer;
            int client = ::accept4(pfd[i].fd, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (client < 0) {
                // EMFILE and the like: the client waits in the backlog
                // rather than the proxy spinning on it; say so once a second.
                if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
                    std::fprintf(stderr, "pgrdma proxy: accept: %s\n", std::strerror(errno));
                    ::poll(nullptr, 0, 1000);
                }
                continue;
            }
            start_session(client, settings, max_connections, client_label(peer, ++accepted));
        }
    }
}

}  // namespace

int main(int argc, char** argv)
{
    std::vector<std::string_view> args(argv + 1, argv + argc);
    ProxyOptions options;
    auto is_directory = [](const std::string& path) {
        struct stat st{};
        return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    };
    if (auto error = parse_options(args, is_directory, options); !error.empty()) {
        std::fprintf(stderr, "pgrdma proxy: %s\n%s", error.c_str(), kUsage);
        return kExitUsage;
    }
    if (options.help) {
        std::fputs(kUsage, stdout);
        return 0;
    }
    if (!client_library_loaded()) {
        std::fprintf(stderr, "pgrdma proxy: libpq_rdma.so is not loaded: run it as `pgrdma proxy ...`\n");
        return kExitFailure;
    }
    // The signals that end the proxy are read from a descriptor, by the
    // accepting thread only: blocked here, before any thread starts, so
    // that every session's thread inherits the mask.
    sigset_t ending;
    sigemptyset(&ending);
    sigaddset(&ending, SIGINT);
    sigaddset(&ending, SIGTERM);
    ::pthread_sigmask(SIG_BLOCK, &ending, nullptr);
    std::signal(SIGPIPE, SIG_IGN);
    int signals = ::signalfd(-1, &ending, SFD_CLOEXEC);
    if (signals < 0) {
        std::fprintf(stderr, "pgrdma proxy: signalfd: %s\n", std::strerror(errno));
        return kExitFailure;
    }

    Listeners listeners;
    std::string where;
    for (const auto& endpoint : options.listen) {
        if (auto error = listeners.open(endpoint); !error.empty()) {
            std::fprintf(stderr, "pgrdma proxy: %s\n", error.c_str());
            return kExitFailure;
        }
        where += (where.empty() ? "" : ", ") + describe(endpoint);
    }
    // Never freed: the sessions' threads read it until the process ends.
    const auto& settings = *new RelaySettings{options.server, options.connect_timeout, kOpeningTimeout};
    const char* policy = std::getenv("WITH_RSOCKET");
    std::fprintf(stderr,
                 "pgrdma proxy: listening on %s; carrying connections to %s (WITH_RSOCKET=%s; a rule of the "
                 "servers file for that address comes first)\n",
                 where.c_str(), describe(options.server).c_str(), policy != nullptr ? policy : "(unset)");

    if (serve(listeners, signals, settings, options.max_connections)) {
        std::fprintf(stderr, "pgrdma proxy: ended, %u sessions cut\n", g_active.load());
        return kExitFailure;
    }
    listeners.close_all();
    std::fprintf(stderr, "pgrdma proxy: no longer listening; waiting for %u open sessions to end (signal again to "
                         "end them now)\n", g_active.load());
    pollfd pfd{signals, POLLIN, 0};
    while (g_active.load() > 0) {
        if (::poll(&pfd, 1, kDrainPollMs) > 0) {
            std::fprintf(stderr, "pgrdma proxy: ended, %u sessions cut\n", g_active.load());
            return 0;
        }
    }
    std::fprintf(stderr, "pgrdma proxy: ended\n");
    return 0;
}
