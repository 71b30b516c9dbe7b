// descriptor_calls MODE CONNINFO: what a program may do to the number of a
// session on RDMA behind libpq's back, each a case that went wrong before
// (a dup refused send() with ENOTSOCK, a replaced number kept sending into
// the session, a fortified poll never saw POLLOUT). Built with
// -D_FORTIFY_SOURCE=2 -O2, so its poll/read calls are glibc's __poll_chk
// and __read_chk. Run under libpq_rdma.so. MODE:
//   dup          the session through dup() and fcntl(F_DUPFD_CLOEXEC) copies
//                (Python's socket.fromfd); closing a copy leaves it open
//   msg          a query through sendmsg/recvmsg, recvfrom and sendto
//   fortified    poll for POLLOUT and read, as fortified calls
//   replaced     the number replaced by dup2 onto it: writes go to the new file
//   close_range  the number closed by close_range, then reused
//   closefrom    the same with closefrom
//   fclose       the same with fclose of an fdopen'ed stream
//   syscall_close  the same with syscall(SYS_close, fd), as libuv (Node)
//                closes every descriptor on Linux
//   signal_close close() of the number in a signal handler while this thread
//                waits in poll() on it; the process lives on, and the number's
//                next file gets its own writes
//   thread_close close() of the number by another thread while this one
//                waits in poll() on it (longer than the transport's own
//                bounded wait for a call inside: the session must outlive
//                the close until this call leaves it)
//   vfork        a vfork child closes every descriptor with close_range (as
//                Python's subprocess does) and exits; the parent's session
//                still answers
//   fionread     ioctl(FIONREAD) counts the bytes a read then returns, and
//                says 0 once the server has closed (the JDK's SSLSocket
//                close() drains "while available() > 0": a readable EOF
//                counted as a byte kept it spinning for ever)
// Each query goes as a raw simple-protocol 'Q' and is read to its
// ReadyForQuery; libpq then finds its session where it left it. Exit 0 on
// success; 1 with a reason on stderr.
#include <arpa/inet.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kWaitMs = 10000;  // for an answer from the server

[[noreturn]] void die(const std::string& why) {
    std::fprintf(stderr, "FAIL: %s (errno: %s)\n", why.c_str(), std::strerror(errno));
    std::exit(1);
}

std::string query_message(const char* sql) {
    const std::uint32_t len = htonl(static_cast<std::uint32_t>(4 + std::strlen(sql) + 1));
    std::string m = "Q";
    m.append(reinterpret_cast<const char*>(&len), 4);
    m.append(sql, std::strlen(sql) + 1);
    return m;
}

// Waits for `events` on fd through poll (fortified here when nfds is not a
// constant: __poll_chk).
bool wait_for(int fd, short events, int timeout_ms) {
    pollfd fds[2] = {{fd, events, 0}, {-1, 0, 0}};
    volatile nfds_t n = 1;  // not a constant: the fortified call
    const int rc = poll(fds, n, timeout_ms);
    return rc == 1 && (fds[0].revents & events) != 0;
}

// Reads messages until ReadyForQuery; returns the first DataRow's first
// column ("" when none).
std::string read_result(int fd, ssize_t (*reader)(int, char*, size_t)) {
    std::string in;
    std::string value;
    for (;;) {
        // Whole messages at the front.
        while (in.size() >= 5) {
            std::uint32_t len;
            std::memcpy(&len, in.data() + 1, 4);
            len = ntohl(len);
            if (in.size() < 1 + len) break;
            const char type = in[0];
            if (type == 'D' && value.empty() && len >= 10) {
                std::uint32_t col;
                std::memcpy(&col, in.data() + 7, 4);
                col = ntohl(col);
                value.assign(in.data() + 11, col);
            }
            if (type == 'E') die("the server answered with an error");
            in.erase(0, 1 + len);
            if (type == 'Z') return value;
        }
        if (!wait_for(fd, POLLIN, kWaitMs)) die("no answer within the wait");
        char buf[256];
        const ssize_t n = reader(fd, buf, sizeof buf);
        if (n == 0) die("the session ended");
        if (n < 0) {
            if (errno == EAGAIN) continue;
            die("reading the answer");
        }
        in.append(buf, static_cast<std::size_t>(n));
    }
}

// Into a buffer of known size with a length that is not a constant: the
// fortified __read_chk.
ssize_t plain_read(int fd, char* out, size_t len) {
    char local[256];
    volatile size_t n = len < sizeof local ? len : sizeof local;
    const ssize_t got = read(fd, local, n);
    if (got > 0) std::memcpy(out, local, static_cast<size_t>(got));
    return got;
}
ssize_t plain_recv(int fd, char* buf, size_t len) { return recv(fd, buf, len, 0); }
// Reads what FIONREAD counts, and checks that a read returns all of it.
ssize_t counted_read(int fd, char* buf, size_t len) {
    int waiting = -1;
    if (ioctl(fd, FIONREAD, &waiting) != 0) die("ioctl(FIONREAD)");
    if (waiting < 0) die("FIONREAD counted " + std::to_string(waiting) + " bytes");
    if (waiting == 0) return errno = EAGAIN, -1;  // a wakeup with nothing in yet
    const size_t want = std::min(len, static_cast<size_t>(waiting));
    const ssize_t got = recv(fd, buf, want, MSG_DONTWAIT);
    if (got != static_cast<ssize_t>(want))
        die("FIONREAD counted " + std::to_string(waiting) + " bytes; a read of " + std::to_string(want) +
            " returned " + std::to_string(got));
    return got;
}
ssize_t from_recvmsg(int fd, char* buf, size_t len) {
    iovec iov{buf, len};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    return recvmsg(fd, &m, 0);
}
ssize_t from_recvfrom(int fd, char* buf, size_t len) { return recvfrom(fd, buf, len, 0, nullptr, nullptr); }

void send_all(int fd, const std::string& m, ssize_t (*writer)(int, const char*, size_t)) {
    std::size_t off = 0;
    while (off < m.size()) {
        if (!wait_for(fd, POLLOUT, kWaitMs)) die("the session never became writable");
        const ssize_t n = writer(fd, m.data() + off, m.size() - off);
        if (n < 0 && errno == EAGAIN) continue;
        if (n <= 0) die("sending the query");
        off += static_cast<std::size_t>(n);
    }
}
ssize_t plain_send(int fd, const char* buf, size_t len) { return send(fd, buf, len, MSG_NOSIGNAL); }
ssize_t plain_write(int fd, const char* buf, size_t len) { return write(fd, buf, len); }
ssize_t to_sendmsg(int fd, const char* buf, size_t len) {
    iovec iov[2] = {{const_cast<char*>(buf), 1}, {const_cast<char*>(buf) + 1, len - 1}};
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = len > 1 ? 2 : 1;
    return sendmsg(fd, &m, MSG_NOSIGNAL);
}
ssize_t to_sendto(int fd, const char* buf, size_t len) { return sendto(fd, buf, len, MSG_NOSIGNAL, nullptr, 0); }

std::string ask(int fd, const char* sql, ssize_t (*writer)(int, const char*, size_t),
                ssize_t (*reader)(int, char*, size_t)) {
    send_all(fd, query_message(sql), writer);
    return read_result(fd, reader);
}

// libpq still has its session: a query through it answers.
void libpq_still_works(PGconn* conn) {
    PGresult* r = PQexec(conn, "select 'still'");
    if (PQresultStatus(r) != PGRES_TUPLES_OK || std::strcmp(PQgetvalue(r, 0, 0), "still") != 0)
        die(std::string("libpq's session after the raw query: ") + PQerrorMessage(conn));
    PQclear(r);
}

// The number `fd` names a pipe's write end now: bytes written to it must
// come out of the pipe, not go into the database session.
void number_is_the_pipe(int fd, int pipe_read, const char* how) {
    const char probe[] = "not for the database";
    if (write(fd, probe, sizeof probe) != static_cast<ssize_t>(sizeof probe))
        die(std::string("writing to the number after ") + how);
    char got[sizeof probe] = {};
    const int flags = fcntl(pipe_read, F_GETFL);
    fcntl(pipe_read, F_SETFL, flags | O_NONBLOCK);
    if (read(pipe_read, got, sizeof got) != static_cast<ssize_t>(sizeof probe) || std::memcmp(got, probe, sizeof probe) != 0)
        die(std::string("after ") + how + ", writes to the number did not reach the file now under it");
}

// A pipe whose write end is at exactly `number`, which must be closed now.
// Put there by the raw system call, not through the library's dup3: what
// is tested is what the library did at the close.
int pipe_at(int number, int& pipe_read) {
    if (fcntl(number, F_GETFD) != -1 || errno != EBADF) die("the number is still open after its close");
    int p[2];
    if (pipe(p) != 0) die("pipe");
    pipe_read = p[0];
    if (p[0] == number) pipe_read = fcntl(p[0], F_DUPFD_CLOEXEC, number + 1);  // dup3 below replaces p[0]
    if (p[1] != number) {
        if (syscall(SYS_dup3, p[1], number, 0) != number) die("dup3 onto the freed number");
        close(p[1]);
    }
    return number;
}

volatile sig_atomic_t g_fd_to_close = -1;
void close_in_handler(int) {
    if (g_fd_to_close >= 0) close(g_fd_to_close);
}

}  // namespace

int run(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: descriptor_calls MODE CONNINFO\n");
        return 2;
    }
    const std::string mode = argv[1];
    PGconn* conn = PQconnectdb(argv[2]);
    if (PQstatus(conn) != CONNECTION_OK) die(std::string("connect: ") + PQerrorMessage(conn));
    const int fd = PQsocket(conn);

    if (mode == "dup") {
        const int a = dup(fd);
        const int b = fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (a < 0 || b < 0) die("dup");
        if (ask(a, "select 'via dup'", plain_send, plain_recv) != "via dup") die("a query through dup()'s copy");
        if (ask(b, "select 'via fcntl'", plain_write, plain_read) != "via fcntl") die("a query through F_DUPFD_CLOEXEC's copy");
        close(a);
        close(b);
        libpq_still_works(conn);
        std::printf("ok: queries through dup() and F_DUPFD_CLOEXEC copies; closing them left the session open\n");
    } else if (mode == "msg") {
        if (ask(fd, "select 'via msghdr'", to_sendmsg, from_recvmsg) != "via msghdr") die("sendmsg/recvmsg");
        if (ask(fd, "select 'via addr'", to_sendto, from_recvfrom) != "via addr") die("sendto/recvfrom");
        libpq_still_works(conn);
        std::printf("ok: queries through sendmsg/recvmsg and sendto/recvfrom\n");
    } else if (mode == "fortified") {
        if (!wait_for(fd, POLLOUT, kWaitMs)) die("a fortified poll never reported POLLOUT");
        if (ask(fd, "select 'fortified'", plain_write, plain_read) != "fortified") die("fortified read");
        libpq_still_works(conn);
        std::printf("ok: __poll_chk reports POLLOUT and __read_chk reads the session\n");
    } else if (mode == "replaced") {
        int p[2];
        if (pipe(p) != 0) die("pipe");
        if (dup2(p[1], fd) != fd) die("dup2");
        number_is_the_pipe(fd, p[0], "dup2 onto it");
        std::printf("ok: after dup2 onto the number, its writes go to the new file\n");
    } else if (mode == "close_range" || mode == "closefrom" || mode == "fclose" || mode == "syscall_close") {
        if (mode == "close_range") {
            if (close_range(static_cast<unsigned>(fd), static_cast<unsigned>(fd), 0) != 0) die("close_range");
        } else if (mode == "closefrom") {
            closefrom(fd);  // stdin/out/err stay: the number is above them
        } else if (mode == "syscall_close") {
            if (syscall(SYS_close, fd) != 0) die("syscall(SYS_close)");
        } else {
            FILE* f = fdopen(fd, "r+");
            if (f == nullptr) die("fdopen");
            fclose(f);
        }
        int pipe_read = -1;
        pipe_at(fd, pipe_read);
        number_is_the_pipe(fd, pipe_read, mode.c_str());
        std::printf("ok: after %s, the number's next file gets its own writes\n", mode.c_str());
        return 0;  // PQfinish would write its Terminate into the pipe now under the number
    } else if (mode == "signal_close") {
        signal(SIGALRM, close_in_handler);
        g_fd_to_close = fd;
        const itimerval soon{{0, 0}, {0, 200'000}};
        setitimer(ITIMER_REAL, &soon, nullptr);
        // Nothing arrives: the handler closes the number under this wait.
        pollfd p{fd, POLLIN, 0};
        const int rc = poll(&p, 1, 2000);
        int pipe_read = -1;
        pipe_at(fd, pipe_read);
        number_is_the_pipe(fd, pipe_read, "a close() in a signal handler");
        std::printf("ok: the number was closed in a signal handler during poll() on it (poll: %d, revents %#x); "
                    "the process lives and the number's next file gets its own writes\n",
                    rc, static_cast<unsigned>(p.revents));
        return 0;
    } else if (mode == "thread_close") {
        std::thread closer([fd] {
            usleep(200'000);
            close(fd);
        });
        pollfd p{fd, POLLIN, 0};
        const int rc = poll(&p, 1, 4000);
        closer.join();
        std::printf("ok: the number was closed by another thread during poll() on it (poll: %d, revents %#x); "
                    "the process lives\n",
                    rc, static_cast<unsigned>(p.revents));
        return 0;
    } else if (mode == "vfork") {
        const pid_t child = vfork();
        if (child == 0) {
            (void)close_range(3, ~0U, 0);
            _exit(0);
        }
        if (child < 0) die("vfork");
        int status = 0;
        waitpid(child, &status, 0);
        if (ask(fd, "select 'after vfork'", plain_send, plain_recv) != "after vfork")
            die("the session after a vfork child's close_range");
        libpq_still_works(conn);
        std::printf("ok: a vfork child's close_range left the parent's session whole\n");
    } else if (mode == "fionread") {
        if (ask(fd, "select repeat('n', 3000)", plain_write, counted_read) != std::string(3000, 'n'))
            die("a result read by FIONREAD's counts");
        // Terminate: the server closes its end.
        send_all(fd, std::string("X\0\0\0\4", 5), plain_write);
        if (!wait_for(fd, POLLIN, kWaitMs)) die("the server's close never made the session readable");
        for (int round = 0; round < 2; ++round) {
            int waiting = -1;
            if (ioctl(fd, FIONREAD, &waiting) != 0) die("ioctl(FIONREAD) at EOF");
            if (waiting != 0) die("FIONREAD at EOF counted " + std::to_string(waiting) + " bytes");
            char c;
            if (recv(fd, &c, 1, MSG_DONTWAIT) != 0) die("a read at EOF did not return 0");
        }
        PQfinish(conn);
        std::printf("ok: FIONREAD counts the bytes a read returns, and 0 once the server has closed\n");
        return 0;
    } else {
        die("unknown mode " + mode);
    }
    PQfinish(conn);
    return 0;
}

// DESCRIPTOR_CALLS_QUICK_EXIT=1 (the AddressSanitizer runs): leave with
// _exit. AddressSanitizer's runtime preloaded into a program whose libpq
// loads p11-kit hangs in p11-kit's exit handler (seen on Debian 12 with no
// pg_rdma in the process at all); a use after free is reported where it
// happens, not at exit, so nothing is lost.
int main(int argc, char** argv) {
    const int rc = run(argc, argv);
    if (const char* quick = std::getenv("DESCRIPTOR_CALLS_QUICK_EXIT"); quick != nullptr && quick[0] == '1') {
        std::fflush(nullptr);
        _exit(rc);
    }
    return rc;
}
