// stream_pump: one end of an RDMA session across the two-host link
// (suite 'rdma-pair'), for the mid-session fault tests (fault_stream_test.sh).
// It moves a deterministic pseudo-random byte stream both ways over one
// transport Connection (TCP connection upgraded with upgrade_client /
// upgrade_server, as pg_rdma does) and checks every byte it receives against
// the same generator, so a lost, repeated or corrupted byte is found at its
// offset. It never blocks for long: every wait is at most 200 ms, and the
// run is bounded by --limit and by --stall (no byte moved, no error).
//
// usage:
//   stream_pump server|client --ip IP --port PORT [--mode bulk|idle]
//       [--bytes N]          bulk: bytes each way (default 100 MiB)
//       [--idle-s S]         idle: seconds to sit idle between the two
//                            exchanges (default 35)
//       [--marker PATH]      created (atomically) at the fault point: bulk,
//                            once --marker-at bytes were received; idle,
//                            once the first exchange is done
//       [--marker-at N]      (default 20 MiB)
//       [--fault-file PATH]  the moment this file appears is taken as the
//                            fault's start; times are printed from there
//       [--stall S]          no progress and no error for S seconds while
//                            bytes are due: outcome hang (default 40)
//       [--limit S]          the whole run (default 240)
//   server: listens on IP:PORT (TCP), accepts one client, takes the upgrade
//   request and upgrades; client: connects, upgrade_client(require).
//
// Output: progress lines every 2 s, then one parseable line, the last:
//   outcome: intact|error|wrong-bytes|hang|slow|setup-failed key=value...
// (slow: still moving when --limit passed, with the rates before and after
// the fault; hang: nothing moved for --stall seconds and no error)
// with sent=, received=, elapsed_s=, after_fault_s= (time of the end from
// the fault's start, -1 if no fault was seen), errno=, error="..." (the
// failed call, strerror, and Connection::failure_reason()), mismatch_at=.
// Exit status: 0 intact, 1 error, 2 wrong-bytes, 3 hang or slow, 4 setup/usage.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "protocol/upgrade.hpp"
#include "transport/tcp_upgrade.hpp"

namespace transport = pg_rdma::transport;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::uint64_t kServerSeed = 0x5e55'0001;
constexpr std::uint64_t kClientSeed = 0xc11e'0002;
constexpr std::size_t kChunk = 64 * 1024;
constexpr std::size_t kIdleMessage = 1024 * 1024;  // each exchange of the idle mode

struct Options {
    bool server = false;
    std::string ip;
    int port = 0;
    bool idle = false;
    std::uint64_t bytes = 100ull << 20;
    double idle_s = 35;
    std::string marker;
    std::uint64_t marker_at = 20ull << 20;
    std::string fault_file;
    double stall_s = 40;
    double limit_s = 240;
};

std::uint64_t splitmix(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// The stream's byte at `offset`: addressable, so any chunk can be made or
// checked on its own.
inline std::uint8_t pattern_byte(std::uint64_t seed, std::uint64_t offset) {
    return static_cast<std::uint8_t>(splitmix(seed ^ (offset >> 3)) >> ((offset & 7) * 8));
}

void fill(std::uint64_t seed, std::uint64_t offset, std::uint8_t* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) p[i] = pattern_byte(seed, offset + i);
}

// Index of the first byte of p[0..n) that is not the stream's, or n.
std::size_t first_mismatch(std::uint64_t seed, std::uint64_t offset, const std::uint8_t* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
        if (p[i] != pattern_byte(seed, offset + i)) return i;
    return n;
}

bool file_exists(const std::string& path) {
    struct stat st;
    return !path.empty() && ::stat(path.c_str(), &st) == 0;
}

void create_marker(const std::string& path, const std::string& text) {
    if (path.empty()) return;
    const std::string tmp = path + ".tmp";
    if (FILE* f = std::fopen(tmp.c_str(), "w")) {
        std::fprintf(f, "%s\n", text.c_str());
        std::fclose(f);
        std::rename(tmp.c_str(), path.c_str());
    }
}

class Pump {
public:
    Pump(const Options& o, transport::Connection& c)
        : o_(o), c_(c), start_(Clock::now()), last_progress_(start_), last_print_(start_),
          out_seed_(o.server ? kServerSeed : kClientSeed), in_seed_(o.server ? kClientSeed : kServerSeed),
          outbuf_(kChunk), inbuf_(kChunk) {}

    // Moves `out_total` bytes out and `in_total` in (the counters run on
    // over the whole session), until both are done, an error, a mismatch,
    // a stall or the limit. True when both are done.
    bool move(std::uint64_t out_total, std::uint64_t in_total) {
        while (sent_ < out_total || received_ < in_total) {
            watch_fault();
            const auto now = Clock::now();
            if (seconds(start_, now) > o_.limit_s) return slow();
            if (seconds(last_progress_, now) > o_.stall_s)
                return hang("no byte moved for " + std::to_string(o_.stall_s) + " s and no error");
            if (seconds(last_print_, now) >= 2) print_progress(now);
            bool moved = false;
            if (sent_ < out_total) {
                if (out_len_ == out_pos_) {
                    out_len_ = static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, out_total - sent_));
                    out_pos_ = 0;
                    fill(out_seed_, sent_, outbuf_.data(), out_len_);
                }
                const ssize_t w = c_.write(outbuf_.data() + out_pos_, out_len_ - out_pos_);
                if (w > 0) {
                    out_pos_ += static_cast<std::size_t>(w);
                    sent_ += static_cast<std::uint64_t>(w);
                    moved = true;
                } else if (w < 0 && errno != EAGAIN) {
                    return failed("write", errno);
                }
            }
            if (received_ < in_total) {
                const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, in_total - received_));
                const ssize_t r = c_.read(inbuf_.data(), want);
                if (r > 0) {
                    const std::size_t n = static_cast<std::size_t>(r);
                    const std::size_t bad = first_mismatch(in_seed_, received_, inbuf_.data(), n);
                    if (bad != n) return wrong(received_ + bad, inbuf_[bad]);
                    received_ += n;
                    moved = true;
                    if (!marked_ && !o_.idle && received_ >= o_.marker_at) mark();
                } else if (r == 0) {
                    return failed_eof();
                } else if (errno != EAGAIN) {
                    return failed("read", errno);
                }
            }
            if (moved) {
                last_progress_ = Clock::now();
                continue;
            }
            short want = 0;
            if (sent_ < out_total) want |= POLLOUT;
            if (received_ < in_total) want |= POLLIN;
            if (c_.wait(want, 200) < 0 && errno != EINTR) return failed("wait", errno);
        }
        return true;
    }

    // Sits idle for `secs`, noticing an error, EOF or unexpected bytes.
    bool idle(double secs) {
        const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(secs));
        while (Clock::now() < until) {
            watch_fault();
            if (seconds(last_print_, Clock::now()) >= 5) print_progress(Clock::now());
            const int ev = c_.wait(POLLIN, 200);
            if (ev < 0 && errno != EINTR) return failed("wait", errno);
            if (ev > 0) {
                // Bytes: the peer's idle ended first and its second
                // exchange began; move() checks them. Otherwise EOF or an
                // error, which read() says.
                if (c_.unread_bytes() > 0) break;
                std::uint8_t b;
                const ssize_t r = c_.read(&b, 1);
                if (r == 0) return failed_eof();
                if (r < 0 && errno != EAGAIN) return failed("read (idle)", errno);
                if (r > 0) {
                    if (b != pattern_byte(in_seed_, received_)) return wrong(received_, b);
                    ++received_;
                    break;
                }
            }
        }
        last_progress_ = Clock::now();
        return true;
    }

    // Orderly end: shutdown(SHUT_WR), the peer's EOF, close.
    bool finish() {
        if (c_.shutdown(SHUT_WR) != 0) return failed("shutdown", errno);
        const auto until = Clock::now() + std::chrono::seconds(30);
        while (true) {
            watch_fault();
            std::uint8_t b;
            const ssize_t r = c_.read(&b, 1);
            if (r == 0) break;
            if (r > 0) return wrong(received_, b);
            if (errno != EAGAIN) return failed("read (waiting for EOF)", errno);
            if (Clock::now() > until) return hang("no EOF from the peer within 30 s after all bytes");
            if (c_.wait(POLLIN, 200) < 0 && errno != EINTR) return failed("wait (EOF)", errno);
        }
        if (c_.close() != 0) return failed("close", errno);
        return true;
    }

    void mark() {
        marked_ = true;
        std::printf("stream_pump: fault point reached at %.2f s (sent %llu, received %llu)\n", seconds(start_, Clock::now()),
                    ull(sent_), ull(received_));
        std::fflush(stdout);
        create_marker(o_.marker, std::to_string(received_));
    }

    int report_intact() {
        outcome("intact", "");
        return 0;
    }
    int exit_code() const { return exit_code_; }

private:
    static unsigned long long ull(std::uint64_t v) { return static_cast<unsigned long long>(v); }
    static double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

    void watch_fault() {
        if (fault_seen_ || o_.fault_file.empty()) return;
        const auto now = Clock::now();
        if (now - last_fault_check_ < std::chrono::milliseconds(100)) return;
        last_fault_check_ = now;
        if (file_exists(o_.fault_file)) {
            fault_seen_ = true;
            fault_at_ = now;
            received_at_fault_ = received_;
            std::printf("stream_pump: fault started at %.2f s (sent %llu, received %llu)\n", seconds(start_, now), ull(sent_),
                        ull(received_));
            std::fflush(stdout);
        }
    }

    void print_progress(Clock::time_point now) {
        last_print_ = now;
        std::printf("stream_pump: %.1f s: sent %llu, received %llu%s\n", seconds(start_, now), ull(sent_), ull(received_),
                    fault_seen_ ? (" (" + std::to_string(seconds(fault_at_, now)) + " s after the fault)").c_str() : "");
        std::fflush(stdout);
    }

    void outcome(const char* what, const std::string& extra) {
        const auto now = Clock::now();
        const std::string why = c_.failover_reason();
        std::string quoted;
        for (char ch : why) quoted += ch == '"' ? '\'' : ch;
        std::printf("outcome: %s side=%s mode=%s sent=%llu received=%llu elapsed_s=%.2f after_fault_s=%.2f "
                    "transport=%s failover_reason=\"%s\"%s\n",
                    what, o_.server ? "server" : "client", o_.idle ? "idle" : "bulk", ull(sent_), ull(received_),
                    seconds(start_, now), fault_seen_ ? seconds(fault_at_, now) : -1.0,
                    c_.stats().failed_over ? "tcp" : "rdma", quoted.c_str(), extra.c_str());
        std::fflush(stdout);
    }

    bool failed(const char* call, int code) {
        const std::string reason = c_.failure_reason();
        const std::string err = std::string(call) + ": " + std::strerror(code) + (reason.empty() ? "" : "; " + reason);
        std::string quoted;
        for (char ch : err) quoted += ch == '"' ? '\'' : ch;
        outcome("error", " errno=" + std::to_string(code) + " error=\"" + quoted + "\"");
        exit_code_ = 1;
        return false;
    }
    bool failed_eof() {
        outcome("error", " errno=0 error=\"EOF from the peer before every byte arrived\"");
        exit_code_ = 1;
        return false;
    }
    bool wrong(std::uint64_t at, std::uint8_t got) {
        outcome("wrong-bytes", " mismatch_at=" + std::to_string(at) + " got=" + std::to_string(got) +
                                   " expected=" + std::to_string(pattern_byte(in_seed_, at)));
        exit_code_ = 2;
        return false;
    }
    // The limit passed while bytes still moved (a stall is a hang): how
    // fast before and after the fault, in MB/s received.
    bool slow() {
        const auto now = Clock::now();
        char buf[256];
        const double before = fault_seen_ ? static_cast<double>(received_at_fault_) / 1e6 / std::max(1e-3, seconds(start_, fault_at_)) : 0;
        const double after = fault_seen_ ? static_cast<double>(received_ - received_at_fault_) / 1e6 / std::max(1e-3, seconds(fault_at_, now)) : 0;
        std::snprintf(buf, sizeof buf,
                      " mb_per_s_before_fault=%.3f mb_per_s_after_fault=%.3f why=\"still moving when the run's limit (%.0f s) passed\"",
                      before, after, o_.limit_s);
        outcome("slow", buf);
        exit_code_ = 3;
        return false;
    }
    bool hang(const std::string& why) {
        outcome("hang", " why=\"" + why + "\"");
        exit_code_ = 3;
        return false;
    }

    const Options& o_;
    transport::Connection& c_;
    Clock::time_point start_, last_progress_, last_print_, last_fault_check_{}, fault_at_{};
    bool fault_seen_ = false, marked_ = false;
    std::uint64_t out_seed_, in_seed_;
    std::uint64_t sent_ = 0, received_ = 0, received_at_fault_ = 0;
    std::vector<std::uint8_t> outbuf_, inbuf_;
    std::size_t out_len_ = 0, out_pos_ = 0;
    int exit_code_ = 0;
};

int usage() {
    std::fprintf(stderr,
                 "usage: stream_pump server|client --ip IP --port PORT [--mode bulk|idle] [--bytes N] [--idle-s S]\n"
                 "       [--marker PATH] [--marker-at N] [--fault-file PATH] [--stall S] [--limit S]\n");
    return 4;
}

int setup_failed(const std::string& why) {
    std::printf("outcome: setup-failed error=\"%s\"\n", why.c_str());
    return 4;
}

bool parse(int argc, char** argv, Options& o) {
    if (argc < 2) return false;
    if (std::strcmp(argv[1], "server") == 0) o.server = true;
    else if (std::strcmp(argv[1], "client") != 0) return false;
    for (int i = 2; i + 1 < argc; i += 2) {
        const std::string k = argv[i];
        const char* v = argv[i + 1];
        if (k == "--ip") o.ip = v;
        else if (k == "--port") o.port = std::atoi(v);
        else if (k == "--mode") o.idle = std::strcmp(v, "idle") == 0;
        else if (k == "--bytes") o.bytes = std::strtoull(v, nullptr, 10);
        else if (k == "--idle-s") o.idle_s = std::atof(v);
        else if (k == "--marker") o.marker = v;
        else if (k == "--marker-at") o.marker_at = std::strtoull(v, nullptr, 10);
        else if (k == "--fault-file") o.fault_file = v;
        else if (k == "--stall") o.stall_s = std::atof(v);
        else if (k == "--limit") o.limit_s = std::atof(v);
        else return false;
    }
    return (argc % 2) == 0 && !o.ip.empty() && o.port > 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (!parse(argc, argv, o)) return usage();
    setvbuf(stdout, nullptr, _IOLBF, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(o.port));
    if (inet_pton(AF_INET, o.ip.c_str(), &addr.sin_addr) != 1) return usage();

    const auto t0 = Clock::now();
    int fd = -1;
    transport::UpgradeResult result;
    if (o.server) {
        const int lfd = socket(AF_INET, SOCK_STREAM, 0);
        const int one = 1;
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(lfd, 1) != 0)
            return setup_failed(std::string("listen: ") + std::strerror(errno));
        std::printf("stream_pump: listening on %s:%d\n", o.ip.c_str(), o.port);
        create_marker(o.marker.empty() ? "" : o.marker + ".listening", "");
        fd = accept(lfd, nullptr, nullptr);
        close(lfd);
        if (fd < 0) return setup_failed(std::string("accept: ") + std::strerror(errno));
        std::uint8_t first[pg_rdma::protocol::kUpgradeRequestLength];
        std::size_t got = 0;
        while (got < sizeof first) {
            const ssize_t r = recv(fd, first + got, sizeof first - got, 0);
            if (r <= 0) return setup_failed("no upgrade request on TCP");
            got += static_cast<std::size_t>(r);
        }
        const auto kind = pg_rdma::protocol::classify_first_packet(std::span<const std::uint8_t>(first, sizeof first));
        if (!kind.is_ok() || kind.value != pg_rdma::protocol::FirstPacket::Upgrade)
            return setup_failed("the first bytes are not an upgrade request");
        result = transport::upgrade_server(fd, transport::Settings{});
    } else {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
            return setup_failed(std::string("connect: ") + std::strerror(errno));
        result = transport::upgrade_client(fd, transport::Mode::Require, transport::Settings{});
    }
    if (result.outcome != transport::UpgradeOutcome::Rdma || !result.connection)
        return setup_failed(std::string(transport::to_string(result.outcome)) + ": " + result.error.message);
    auto& conn = *result.connection;
    const auto st = conn.stats();
    std::printf("stream_pump: %s over RDMA on %s in %.2f s; keepalive %u ms / %u ms; mode %s\n",
                o.server ? "server" : "client", conn.device_name().c_str(),
                std::chrono::duration<double>(Clock::now() - t0).count(), st.keepalive_interval_ms,
                st.keepalive_timeout_ms, o.idle ? "idle" : "bulk");

    Pump pump(o, conn);
    bool ok;
    if (!o.idle) {
        ok = pump.move(o.bytes, o.bytes) && pump.finish();
    } else {
        ok = pump.move(kIdleMessage, kIdleMessage);
        if (ok) {
            pump.mark();
            std::printf("stream_pump: first exchange done; idle for %.0f s\n", o.idle_s);
            ok = pump.idle(o.idle_s) && pump.move(2 * kIdleMessage, 2 * kIdleMessage) && pump.finish();
        }
    }
    const int rc = ok ? pump.report_intact() : pump.exit_code();
    close(fd);  // the TCP connection, held for the session's life
    return rc;
}
