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
#include <sys/resource.h>
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

#include "libclient/conninfo/policy.hpp"
#include "libclient/proxy/listeners.hpp"
#include "libclient/proxy/options.hpp"
#include "libclient/proxy/relay.hpp"

namespace {

using namespace pg_rdma::proxy;
using pg_rdma::conninfo::RsocketPolicy;

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
// While it waits for the last sessions after a first SIGTERM, how often the
// proxy looks at their count, in milliseconds.
constexpr int kDrainPollMs = 200;
// Threads beyond --max-connections, for clients that are read and then
// told they are too many; past that a client is closed unanswered.
constexpr unsigned kRefusingThreads = 16;
// What one session costs the proxy, for the start-up check of its limits:
// descriptors (options.hpp), and memory the RDMA session pins with the
// server's default ring sizes (libclient/README.md).
constexpr unsigned kDescriptorsPerSession = 8;
constexpr unsigned kSpareDescriptors = 32;
constexpr unsigned long kPinnedBytesPerSession = 400UL * 1024;
// After accept() fails for lack of descriptors, the wait before the next
// try, in milliseconds: the client waits in the backlog meanwhile.
constexpr int kAcceptRetryMs = 1000;

std::atomic<unsigned> g_threads{0};
std::atomic<unsigned> g_sessions{0};

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

// Ends the process with sessions still being carried by their threads:
// without running exit handlers, which would close the library's sessions
// under those threads' calls. The kernel closes every descriptor, as for a
// killed process: the server sees each session end.
[[noreturn]] void end_now(int status, const char* line)
{
    std::fprintf(stderr, "pgrdma proxy: %s\n", line);
    std::fflush(stderr);
    ::_exit(status);
}

void start_thread(int client, const RelaySettings& settings, std::string label)
{
    if (g_threads.load() >= settings.max_sessions + kRefusingThreads) {
        std::fprintf(stderr, "pgrdma proxy: %s: closed unanswered, %u connections being served or refused\n",
                     label.c_str(), g_threads.load());
        ::close(client);
        return;
    }
    ++g_threads;
    try {
        std::thread([client, &settings, label = std::move(label)] {
            carry(client, settings, g_sessions, label);
            --g_threads;
        }).detach();
    } catch (const std::exception& e) {
        --g_threads;
        std::fprintf(stderr, "pgrdma proxy: %s: closed, no thread for it: %s\n", label.c_str(), e.what());
        ::close(client);
    }
}

// Accepts until a signal asks to stop; true when polling failed.
bool serve(const Listeners& listeners, int signals, const RelaySettings& settings)
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
                if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                    std::fprintf(stderr, "pgrdma proxy: accept: %s\n", std::strerror(errno));
                    ::poll(nullptr, 0, kAcceptRetryMs);
                }
                continue;
            }
            start_thread(client, settings, client_label(peer, ++accepted));
        }
    }
}

// The policy WITH_RSOCKET gives: exits on a value that is not one, since
// the library would ignore it and carry every connection over TCP.
RsocketPolicy environment_policy()
{
    const char* value = std::getenv(pg_rdma::conninfo::kEnvironmentVariable);
    if (value == nullptr)
        return RsocketPolicy::Off;
    auto parsed = pg_rdma::conninfo::parse_policy_value(value);
    if (!parsed.ok()) {
        std::fprintf(stderr, "pgrdma proxy: WITH_RSOCKET=%s is not true, false or require\n", value);
        std::exit(kExitUsage);
    }
    return *parsed.policy;
}

// Says so when the process's limits cannot hold --max-connections sessions.
void check_limits(unsigned max_sessions)
{
    rlimit files{};
    if (::getrlimit(RLIMIT_NOFILE, &files) == 0 &&
        files.rlim_cur < static_cast<rlim_t>(max_sessions) * kDescriptorsPerSession + kSpareDescriptors)
        std::fprintf(stderr,
                     "pgrdma proxy: WARNING: the descriptor limit (%llu, ulimit -n; LimitNOFILE= under systemd) "
                     "holds fewer than --max-connections %u sessions of about %u descriptors each\n",
                     static_cast<unsigned long long>(files.rlim_cur), max_sessions, kDescriptorsPerSession);
    rlimit pinned{};
    if (::getrlimit(RLIMIT_MEMLOCK, &pinned) == 0 && pinned.rlim_cur != RLIM_INFINITY &&
        pinned.rlim_cur < static_cast<rlim_t>(max_sessions) * kPinnedBytesPerSession)
        std::fprintf(stderr,
                     "pgrdma proxy: WARNING: the memory lock limit (%llu kB, ulimit -l; LimitMEMLOCK= under "
                     "systemd) holds fewer than --max-connections %u RDMA sessions of about %lu kB each: the "
                     "sessions past it go over TCP, or fail under require\n",
                     static_cast<unsigned long long>(pinned.rlim_cur / 1024), max_sessions,
                     kPinnedBytesPerSession / 1024);
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
    RsocketPolicy policy = environment_policy();
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
    bool unix_socket = false;
    for (const auto& endpoint : options.listen) {
        if (auto error = listeners.open(endpoint, options.socket_mode); !error.empty()) {
            std::fprintf(stderr, "pgrdma proxy: %s\n", error.c_str());
            return kExitFailure;
        }
        where += (where.empty() ? "" : ", ") + describe(endpoint);
        unix_socket = unix_socket || std::holds_alternative<UnixListen>(endpoint);
    }
    // Never freed: the sessions' threads read it until the process ends.
    const auto& settings = *new RelaySettings{options.server, options.connect_timeout, kOpeningTimeout,
                                              options.max_connections};
    std::fprintf(stderr,
                 "pgrdma proxy: listening on %s; carrying connections to %s (WITH_RSOCKET=%s; a rule of the "
                 "servers file for that address comes first)\n",
                 where.c_str(), describe(options.server).c_str(),
                 std::getenv(pg_rdma::conninfo::kEnvironmentVariable) != nullptr
                     ? std::getenv(pg_rdma::conninfo::kEnvironmentVariable)
                     : "unset");
    if (policy == RsocketPolicy::Off)
        std::fprintf(stderr, "pgrdma proxy: WARNING: with WITH_RSOCKET off, only a rule of the servers file "
                             "can put these connections on RDMA\n");
    if (unix_socket)
        std::fprintf(stderr, "pgrdma proxy: note: clients do not negotiate TLS on a Unix socket (libpq and pgx "
                             "skip it there): for TLS to the server, use a loopback port\n");
    check_limits(options.max_connections);

    if (serve(listeners, signals, settings)) {
        listeners.close_all();
        end_now(kExitFailure, "ended, open sessions cut");
    }
    listeners.close_all();
    std::fprintf(stderr,
                 "pgrdma proxy: no longer listening; waiting up to %lld s for %u open sessions to end (signal "
                 "again to end them now)\n",
                 static_cast<long long>(options.drain_timeout.count()), g_sessions.load());
    pollfd pfd{signals, POLLIN, 0};
    auto deadline = std::chrono::steady_clock::now() + options.drain_timeout;
    while (g_threads.load() > 0) {
        if (::poll(&pfd, 1, kDrainPollMs) > 0)
            end_now(0, "ended on a second signal, open sessions cut");
        if (std::chrono::steady_clock::now() >= deadline)
            end_now(0, "ended at --drain-timeout, open sessions cut");
    }
    // (_exit here too: a session's thread may still be returning.)
    end_now(0, "ended");
}
