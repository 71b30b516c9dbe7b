#include "libclient/proxy/options.hpp"

#include <charconv>

namespace pg_rdma::proxy {

const char* const kUsage =
    "usage: pgrdma proxy --listen ADDRESS [--listen ADDRESS]... [--max-connections N]\n"
    "                    [--connect-timeout SECONDS] [--drain-timeout SECONDS] [--socket-mode OCTAL] SERVER\n"
    "  Carries each connection made to ADDRESS to the PostgreSQL server SERVER (HOST[:PORT]) over RDMA.\n"
    "  ADDRESS: a directory for a Unix socket (DIR/.s.PGSQL.PORT, PORT the server's; mode 0700 unless\n"
    "           --socket-mode), or a loopback PORT, HOST:PORT or [::1]:PORT (TLS works through these only:\n"
    "           clients do not negotiate it on a Unix socket).\n"
    "  WITH_RSOCKET (true unless set) and the servers file decide RDMA as for any program under pgrdma.\n"
    "  --max-connections (100), --connect-timeout to each server address (10 s), --drain-timeout after\n"
    "  SIGTERM before open sessions are cut (30 s).\n";

namespace {

bool parse_number(std::string_view text, unsigned low, unsigned high, unsigned& value, int base = 10)
{
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, value, base);
    return !text.empty() && ec == std::errc{} && ptr == end && value >= low && value <= high;
}

}  // namespace

std::string parse_options(const std::vector<std::string_view>& args, const IsDirectory& is_directory,
                          ProxyOptions& out)
{
    ProxyOptions options;
    std::vector<std::string_view> listen_texts;
    std::vector<std::string_view> positional;
    for (std::size_t i = 0; i < args.size(); ++i) {
        std::string_view arg = args[i];
        if (arg == "-h" || arg == "--help") {
            options.help = true;
            continue;
        }
        if (arg == "--") {
            positional.insert(positional.end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
            break;
        }
        if (arg.empty() || arg.front() != '-') {
            positional.push_back(arg);
            continue;
        }
        // --name VALUE or --name=VALUE; -l VALUE for --listen.
        std::string_view name = arg;
        std::string_view value;
        bool has_value = false;
        if (auto eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
            name = arg.substr(0, eq);
            value = arg.substr(eq + 1);
            has_value = true;
        }
        if (name != "--listen" && name != "-l" && name != "--max-connections" && name != "--connect-timeout" &&
            name != "--drain-timeout" && name != "--socket-mode")
            return "unknown option " + std::string(arg);
        if (!has_value) {
            if (i + 1 >= args.size())
                return std::string(name) + " needs a value";
            value = args[++i];
        }
        if (name == "--listen" || name == "-l") {
            listen_texts.push_back(value);
        } else if (name == "--max-connections") {
            if (!parse_number(value, 1, kMaxConnectionsLimit, options.max_connections))
                return "--max-connections: a number from 1 to " + std::to_string(kMaxConnectionsLimit) + ", not '" +
                       std::string(value) + "'";
        } else if (name == "--socket-mode") {
            constexpr unsigned kOwnerReadWrite = 0600;
            constexpr unsigned kAllPermissionBits = 0777;
            if (!parse_number(value, 0, kAllPermissionBits, options.socket_mode, 8) ||
                (options.socket_mode & kOwnerReadWrite) != kOwnerReadWrite)
                return "--socket-mode: octal permissions that let the owner read and write (0600 to 0777), not '" +
                       std::string(value) + "'";
        } else {
            unsigned seconds = 0;
            if (!parse_number(value, 1, kMaxTimeoutSeconds, seconds))
                return std::string(name) + ": seconds from 1 to " + std::to_string(kMaxTimeoutSeconds) + ", not '" +
                       std::string(value) + "'";
            (name == "--connect-timeout" ? options.connect_timeout : options.drain_timeout) =
                std::chrono::seconds(seconds);
        }
    }
    if (options.help) {
        out = options;
        return "";
    }
    if (positional.size() != 1)
        return positional.empty() ? "no SERVER given" : "one SERVER only, not " + std::to_string(positional.size());
    if (auto error = parse_server(positional.front(), options.server); !error.empty())
        return error;
    if (listen_texts.empty())
        return "no --listen ADDRESS given";
    for (auto text : listen_texts) {
        ListenEndpoint endpoint;
        bool directory = !text.empty() && text.front() == '/' && is_directory(std::string(text));
        if (auto error = parse_listen(text, options.server.port, directory, endpoint); !error.empty())
            return error;
        options.listen.push_back(std::move(endpoint));
    }
    out = std::move(options);
    return "";
}

}  // namespace pg_rdma::proxy
