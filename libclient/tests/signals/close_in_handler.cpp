// close_in_handler LIBPQ_RDMA_SO: a signal handler closes descriptors (as
// PQcancel does, in a SIGINT handler) while the thread it interrupts keeps
// calling the wrappers that look after a connection's epoll registration.
// libclient/README.md promises close() is async-signal-safe; a close() that
// takes a lock the interrupted thread holds deadlocks that thread.
//
// The connection is held in libpq's TCP connect for the whole run: its
// server is a listener whose one-entry backlog is already full, so the
// kernel leaves the SYN unanswered, and the socket stays in the preload's
// table (with_rsocket=true) with an epoll registration. Exit 0 when the
// loop ran its course; 1, from a watchdog thread, if the thread hung.
#include <arpa/inet.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

namespace {

constexpr auto kRunFor = std::chrono::seconds(2);
constexpr auto kHangAfter = std::chrono::seconds(20);  // the loop alone takes kRunFor
constexpr long kTimerIntervalUs = 50;

std::atomic<long> g_handled{0};

void on_alarm(int) {
    // What PQcancel does last: a socket of its own, closed.
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0) close(fd);
    g_handled.fetch_add(1, std::memory_order_relaxed);
}

int die(const char* what) {
    std::perror(what);
    return 1;
}

}  // namespace

int main() {
    // A listener nobody accepts from, its backlog filled by one connection.
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(listener, 0) != 0 ||
        getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
        return die("listener");
    for (int i = 0; i < 2; ++i) {
        const int filler = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        (void)connect(filler, reinterpret_cast<sockaddr*>(&addr), len);
    }
    const std::string conninfo = "host=127.0.0.1 port=" + std::to_string(ntohs(addr.sin_port)) +
                                 " connect_timeout=30 with_rsocket=true";
    PGconn* conn = PQconnectStart(conninfo.c_str());
    if (conn == nullptr || PQstatus(conn) == CONNECTION_BAD) {
        std::fprintf(stderr, "PQconnectStart: %s", conn ? PQerrorMessage(conn) : "NULL\n");
        return 1;
    }
    if (PQconnectPoll(conn) != PGRES_POLLING_WRITING) {
        std::fprintf(stderr, "expected libpq to wait for its connect: %s", PQerrorMessage(conn));
        return 1;
    }
    const int sock = PQsocket(conn);
    const int epfd = epoll_create1(0);
    epoll_event ev{};
    ev.events = EPOLLOUT;
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, sock, &ev) != 0) return die("epoll_ctl ADD");

    // The watchdog never takes SIGALRM: the handler runs on the main thread.
    sigset_t alarm_only;
    sigemptyset(&alarm_only);
    sigaddset(&alarm_only, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &alarm_only, nullptr);
    std::thread([] {
        std::this_thread::sleep_for(kHangAfter);
        std::fprintf(stderr, "FAIL: the thread hung (a close() in a signal handler deadlocked it?) after %ld signals\n",
                     g_handled.load());
        std::fflush(stderr);
        _exit(1);
    }).detach();
    pthread_sigmask(SIG_UNBLOCK, &alarm_only, nullptr);

    struct sigaction sa{};
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, nullptr);
    const itimerval every{{0, kTimerIntervalUs}, {0, kTimerIntervalUs}};
    setitimer(ITIMER_REAL, &every, nullptr);

    long rounds = 0;
    const auto until = std::chrono::steady_clock::now() + kRunFor;
    while (std::chrono::steady_clock::now() < until) {
        epoll_event got[4];
        (void)epoll_wait(epfd, got, 4, 0);
        ev.events = (rounds & 1) ? EPOLLOUT : EPOLLIN | EPOLLOUT;
        (void)epoll_ctl(epfd, EPOLL_CTL_MOD, sock, &ev);
        ++rounds;
    }
    const itimerval off{};
    setitimer(ITIMER_REAL, &off, nullptr);
    if (PQstatus(conn) == CONNECTION_BAD) {
        std::fprintf(stderr, "the connection failed during the run, so it tested nothing: %s", PQerrorMessage(conn));
        return 1;
    }
    std::printf("ok: %ld rounds of epoll_wait and epoll_ctl on a connecting with_rsocket socket, %ld closes in a "
                "signal handler meanwhile\n",
                rounds, g_handled.load());
    PQfinish(conn);
    return 0;
}
