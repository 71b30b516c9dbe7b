#include "perf/bench_options.hpp"

#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace pg_rdma::perf {

const char* const kUsage =
    "usage: transport_bench server --addr IP [--port P] [--tcp|--rsocket] [--spin] [--nonce HEX]\n"
    "       transport_bench client --addr IP [--port P] [--tcp|--rsocket] [--spin] [--nonce HEX]\n"
    "                              --mode latency|bandwidth --sizes N[,N...] (K/M suffixes)\n"
    "                              [--iters N] [--seconds S]\n"
    "       transport_bench settings\n";

namespace {

constexpr std::size_t kKiB = 1024;

// What the command line said, before checking it is complete.
struct Parsed {
    Options options;
    bool mode_given = false;
};

std::uint64_t parse_count(std::string_view text, const char* what)
{
    std::uint64_t multiplier = 1;
    if (!text.empty() && (text.back() == 'K' || text.back() == 'k'))
        multiplier = kKiB;
    else if (!text.empty() && (text.back() == 'M' || text.back() == 'm'))
        multiplier = kKiB * kKiB;
    if (multiplier != 1)
        text.remove_suffix(1);
    const std::string digits(text);
    char* end = nullptr;
    const unsigned long long value = std::strtoull(digits.c_str(), &end, 10);
    if (digits.empty() || *end != '\0' || value == 0)
        throw UsageError(std::string(what) + ": expected a positive number, got '" + digits + "'");
    return value * multiplier;
}

std::vector<std::size_t> parse_sizes(std::string_view list)
{
    std::vector<std::size_t> sizes;
    while (!list.empty()) {
        const std::size_t comma = list.find(',');
        const std::uint64_t size = parse_count(list.substr(0, comma), "--sizes");
        if (size > kMaxMessageSize)
            throw UsageError("--sizes: " + std::to_string(size) + " is above the maximum " +
                             std::to_string(kMaxMessageSize));
        sizes.push_back(size);
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    }
    if (sizes.empty())
        throw UsageError("--sizes: empty list");
    return sizes;
}

int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

protocol::Nonce parse_nonce(std::string_view hex)
{
    protocol::Nonce nonce{};
    if (hex.size() != 2 * nonce.size())
        throw UsageError("--nonce: expected " + std::to_string(2 * nonce.size()) + " hex digits");
    for (std::size_t i = 0; i < nonce.size(); ++i) {
        const int high = hex_digit(hex[2 * i]);
        const int low = hex_digit(hex[2 * i + 1]);
        if (high < 0 || low < 0)
            throw UsageError("--nonce: not a hex digit");
        nonce[i] = static_cast<std::uint8_t>(high * 16 + low);
    }
    return nonce;
}

std::uint16_t parse_port(std::string_view text)
{
    const std::uint64_t port = parse_count(text, "--port");
    if (port > UINT16_MAX)
        throw UsageError("--port: " + std::string(text) + " is not a port number");
    return static_cast<std::uint16_t>(port);
}

Role parse_role(std::string_view word)
{
    if (word == "server")
        return Role::Server;
    if (word == "client")
        return Role::Client;
    if (word == "settings")
        return Role::Settings;
    throw UsageError("unknown command '" + std::string(word) + "'");
}

Measure parse_measure(std::string_view word)
{
    if (word == "latency")
        return Measure::Latency;
    if (word == "bandwidth")
        return Measure::Bandwidth;
    throw UsageError("--mode: expected latency or bandwidth, got '" + std::string(word) + "'");
}

double parse_seconds(const std::string& text)
{
    char* end = nullptr;
    const double seconds = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(seconds > 0))
        throw UsageError("--seconds: expected a positive number, got '" + text + "'");
    return seconds;
}

// Applies one "--name value" option (or a flag: --tcp, --rsocket, --spin);
// returns how many arguments it used.
int apply_option(Parsed& p, std::string_view name, const char* value)
{
    Options& o = p.options;
    if (name == "--tcp") {
        o.tcp = true;
        return 1;
    }
    if (name == "--rsocket") {
        o.rsocket = true;
        return 1;
    }
    if (name == "--spin") {
        o.spin = true;
        return 1;
    }
    if (value == nullptr)
        throw UsageError(std::string(name) + ": missing value");
    if (name == "--addr")
        o.addr = value;
    else if (name == "--port")
        o.port = parse_port(value);
    else if (name == "--nonce")
        o.nonce = parse_nonce(value);
    else if (name == "--mode") {
        o.plan.measure = parse_measure(value);
        p.mode_given = true;
    } else if (name == "--sizes")
        o.plan.sizes = parse_sizes(value);
    else if (name == "--iters")
        o.plan.max_iters = parse_count(value, "--iters");
    else if (name == "--seconds")
        o.plan.seconds = parse_seconds(value);
    else
        throw UsageError("unknown option '" + std::string(name) + "'");
    return 2;
}

void check_complete(const Parsed& p)
{
    const Options& o = p.options;
    if (o.role == Role::Settings)
        return;
    if (o.addr.empty())
        throw UsageError("--addr is required");
    if (o.tcp && o.rsocket)
        throw UsageError("--tcp and --rsocket: choose one transport");
    if (o.role == Role::Client && (!p.mode_given || o.plan.sizes.empty()))
        throw UsageError("a client needs --mode and --sizes");
}

}  // namespace

Options parse_options(int argc, char** argv)
{
    if (argc < 2)
        throw UsageError("missing command");
    Parsed p;
    p.options.role = parse_role(argv[1]);
    for (int i = 2; i < argc;)
        i += apply_option(p, argv[i], i + 1 < argc ? argv[i + 1] : nullptr);
    check_complete(p);
    return p.options;
}

}  // namespace pg_rdma::perf

