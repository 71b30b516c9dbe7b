// Writes the fuzzers' seed corpora from the real encoders, so the seeds stay
// valid when a layout changes: make_seed_corpus protocol/fuzz/corpus
// Each fuzzer gets every valid message kind it decodes plus a few near misses.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "protocol/byte_order.hpp"
#include "protocol/control.hpp"
#include "protocol/failover.hpp"
#include "protocol/negotiation.hpp"
#include "protocol/probe.hpp"
#include "protocol/upgrade.hpp"

using namespace pg_rdma::protocol;
namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<std::uint8_t>;

template <class C>
Bytes bytes_of(const C& c) { return Bytes(c.begin(), c.end()); }

Bytes concat(Bytes a, const Bytes& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

Bytes pg_packet(std::uint32_t length, std::uint32_t code) {
    Bytes p(length, 0);
    put_u32(p.data(), length);
    put_u32(p.data() + 4, code);
    return p;
}

void write(const fs::path& dir, const std::string& name, const Bytes& b) {
    fs::create_directories(dir);
    std::ofstream(dir / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

FeatureOffer offer() { return {1, 1, 64, kSupportedFeatures, 256 * 1024, 1000, 5000}; }

KeepaliveBounds bounds() { return {100, 600'000}; }

// The 8 bytes fuzz_control reads after a message as the server's bounds.
Bytes bounds_bytes(const KeepaliveBounds& b) {
    Bytes out(8);
    put_u32(out.data(), b.min_interval_ms);
    put_u32(out.data() + 4, b.max_timeout_ms);
    return out;
}

Bytes control(const ControlMessage& m) { return bytes_of(encode_control(m)); }

void control_corpus(const fs::path& dir) {
    const FeatureOffer limits{1, 255, kMaxCredits, ~0ull, kMaxRxBufferSize,
                              kMaxKeepaliveIntervalMs, kMaxKeepaliveTimeoutMs};
    write(dir, "offer", control(offer()));
    write(dir, "offer-limits", control(limits));
    const FeatureOffer fast{1, 1, 64, kSupportedFeatures, 4096, 10, 20};
    write(dir, "offer-fast-with-bounds", concat(control(fast), bounds_bytes(bounds())));
    write(dir, "offer-with-bad-bounds", concat(control(offer()), bounds_bytes({5, 1})));
    write(dir, "agreement-ok", control(negotiate(offer(), offer(), bounds())));
    write(dir, "agreement-refused", control(negotiate({2, 3, 64, 0, 4096, 10, 20}, offer(), bounds())));
    write(dir, "keepalive", control(Keepalive{}));
    write(dir, "xfer-memory", control(XferMemory{0x1234, 0x7f0000000000, 256 * 1024}));
    write(dir, "xfer-memory-top", control(XferMemory{1, ~0ull - 4096, 4096}));
    write(dir, "credit-update", control(CreditUpdate{0xfffffff0u, 1ull << 40}));
    write(dir, "close", control(CloseMessage{123456789, 4242}));
    write(dir, "two-messages", concat(control(Keepalive{}), control(CloseMessage{7})));
    Bytes unknown = control(Keepalive{});
    put_u16(unknown.data(), 6);
    write(dir, "unknown-opcode", unknown);
    Bytes truncated = control(offer());
    truncated.pop_back();
    write(dir, "offer-truncated", truncated);
}

Bytes error_response() {
    const std::string message = "Munsupported frontend protocol 21060.16705: server supports 3.0 to 3.0";
    const std::string fields = std::string("SFATAL") + '\0' + "C0A000" + '\0' + message + '\0' + '\0';
    Bytes b{'E', 0, 0, 0, 0};
    put_u32(b.data() + 1, static_cast<std::uint32_t>(4 + fields.size()));
    b.insert(b.end(), fields.begin(), fields.end());
    return b;
}

void upgrade_reply_corpus(const fs::path& dir) {
    RdmaEndpoint v4{4, {10, 0, 0, 1}, 19000, {}};
    v4.nonce.fill(0x5a);
    RdmaEndpoint v6{6, {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 65535, {}};
    v6.nonce.fill(0xa5);
    write(dir, "accept-ipv4", bytes_of(encode_upgrade_accept(v4)));
    write(dir, "accept-ipv6", bytes_of(encode_upgrade_accept(v6)));
    const Bytes accept = bytes_of(encode_upgrade_accept(v4));
    write(dir, "accept-truncated", Bytes(accept.begin(), accept.begin() + 30));
    write(dir, "decline", {kReplyDecline});
    write(dir, "decline-then-ssl-answer", {kReplyDecline, 'S'});
    write(dir, "error-response", error_response());
    Bytes bad_family = accept;
    bad_family[2] = 5;
    write(dir, "accept-bad-family", bad_family);
}

void first_packet_corpus(const fs::path& dir) {
    const Bytes request = bytes_of(encode_upgrade_request());
    write(dir, "upgrade-request", request);
    write(dir, "upgrade-request-then-ssl", concat(request, pg_packet(8, 80877103)));
    write(dir, "upgrade-request-prefix", Bytes(request.begin(), request.begin() + 5));
    write(dir, "probe-request", bytes_of(encode_probe_request()));
    write(dir, "ssl-request", pg_packet(8, 80877103));
    write(dir, "gssenc-request", pg_packet(8, 80877104));
    write(dir, "cancel-request", pg_packet(16, 80877102));
    const std::string params = std::string("user") + '\0' + "postgres" + '\0' + '\0';
    Bytes startup = pg_packet(8, 0x00030000);
    startup.insert(startup.end(), params.begin(), params.end());
    put_u32(startup.data(), static_cast<std::uint32_t>(startup.size()));
    write(dir, "startup-3.0", startup);
}

void probe_decline_corpus(const fs::path& dir) {
    const std::vector<std::uint8_t> decline = encode_probe_decline("memlock", "RLIMIT_MEMLOCK is 64 KiB");
    write(dir, "decline", bytes_of(decline));
    write(dir, "decline-no-reason", bytes_of(encode_probe_decline("not_accepting", "")));
    write(dir, "decline-truncated", Bytes(decline.begin(), decline.begin() + 9));
}

void connect_private_data_corpus(const fs::path& dir) {
    Nonce nonce{};
    for (std::size_t i = 0; i < nonce.size(); ++i) nonce[i] = static_cast<std::uint8_t>(i);
    const Bytes pd = bytes_of(encode_connect_private_data(nonce));
    write(dir, "private-data", pd);
    write(dir, "private-data-padded", concat(pd, Bytes(16, 0)));
    Bytes bad_magic = pd;
    bad_magic[0] = 'X';
    write(dir, "private-data-bad-magic", bad_magic);
    write(dir, "private-data-short", Bytes(pd.begin(), pd.begin() + 20));
}

void failover_corpus(const fs::path& dir) {
    const Bytes resume = bytes_of(encode_failover({true, 123456, 600000, 654321}));
    write(dir, "failover-resumable", resume);
    write(dir, "failover-not-resumable", bytes_of(encode_failover({false, 0, 0, 0})));
    write(dir, "failover-short", Bytes(resume.begin(), resume.begin() + 10));
    write(dir, "failover-then-stream", concat(resume, Bytes(8, 'Q')));
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s CORPUS_DIR   (protocol/fuzz/corpus)\n", argv[0]);
        return 2;
    }
    const fs::path root = argv[1];
    control_corpus(root / "fuzz_control");
    upgrade_reply_corpus(root / "fuzz_upgrade_reply");
    first_packet_corpus(root / "fuzz_first_packet");
    connect_private_data_corpus(root / "fuzz_connect_private_data");
    probe_decline_corpus(root / "fuzz_probe_decline");
    failover_corpus(root / "fuzz_failover");
    return 0;
}
