#include "server_ext/server_check.hpp"

#include <ifaddrs.h>
#include <netdb.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "server_ext/listen_list.hpp"
#include "transport/address_port.hpp"
#include "transport/pinned_buffer.hpp"

namespace pg_rdma::server {
namespace {

constexpr std::uint64_t kKiB = 1024;

std::string kib(std::uint64_t bytes) { return fmt::format("{} KiB", (bytes + kKiB - 1) / kKiB); }

struct AddrInfoDeleter {
    void operator()(addrinfo* a) const { freeaddrinfo(a); }
};

// One address of the list: `missing` is the status of an address without
// an RDMA device ("problem" when listed by name, "warning" under "*").
void check_one(const sockaddr* address, const std::string& target, const char* missing, std::vector<CheckRow>& rows) {
    transport::AddressPort port;
    transport::Error err;
    if (!transport::rdma_port_of_address(address, port, err)) {
        rows.push_back({"listen_address", target, missing,
                        err.message + ": sessions reaching it fall back to TCP (no_device); list only "
                                      "addresses on an RDMA port (\"rdma link\" shows them)"});
        return;
    }
    const std::string where = fmt::format("{} port {}, {}, MTU {}", port.device, port.port,
                                          port.ethernet ? "RoCE" : "InfiniBand", port.mtu);
    if (port.active)
        rows.push_back({"listen_address", target, "ok", where + ", " + port.state});
    else
        rows.push_back({"listen_address", target, "problem",
                        where + ", port " + port.state + ": sessions to it fail over or fall back until it is "
                                                         "active (check the cable, the switch, \"rdma link\")"});
}

std::string numeric(const sockaddr* address) {
    char host[NI_MAXHOST] = {};
    const socklen_t len = address->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    (void)getnameinfo(address, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST);
    return host;
}

struct IfAddrsDeleter {
    void operator()(ifaddrs* a) const { freeifaddrs(a); }
};

// "*": every address of every interface is offered.
void check_every_address(std::vector<CheckRow>& rows) {
    rows.push_back({"listen_address", "*", "warning",
                    "every local address is offered: a session on one without an RDMA device falls back "
                    "(no_device); listing the RDMA ports' addresses instead keeps such clients from asking"});
    ifaddrs* raw = nullptr;
    if (getifaddrs(&raw) != 0) return;
    const std::unique_ptr<ifaddrs, IfAddrsDeleter> list(raw);
    for (const ifaddrs* i = list.get(); i != nullptr; i = i->ifa_next) {
        if (i->ifa_addr == nullptr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
            continue;
        check_one(i->ifa_addr, fmt::format("* ({} on {})", numeric(i->ifa_addr), i->ifa_name), "warning", rows);
    }
}

void check_address(const std::string& item, std::vector<CheckRow>& rows) {
    if (item == "*") return check_every_address(rows);
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* raw = nullptr;
    if (const int rc = getaddrinfo(item.c_str(), nullptr, &hints, &raw); rc != 0) {
        rows.push_back({"listen_address", item, "problem", fmt::format("does not resolve: {}", gai_strerror(rc))});
        return;
    }
    const std::unique_ptr<addrinfo, AddrInfoDeleter> list(raw);
    for (const addrinfo* a = list.get(); a != nullptr; a = a->ai_next) {
        const std::string host = numeric(a->ai_addr);
        check_one(a->ai_addr, item == host ? item : fmt::format("{} ({})", item, host), "problem", rows);
    }
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

void check_limits(const CheckInputs& in, std::vector<CheckRow>& rows) {
    const std::string limits = read_file(fmt::format("/proc/{}/limits", in.postmaster_pid));
    std::uint64_t soft = 0;
    bool unlimited = false;
    if (!parse_proc_limit(limits, "Max locked memory", soft, unlimited))
        rows.push_back({"memlock", "postmaster", "warning", "its limits could not be read"});
    else if (unlimited)
        rows.push_back({"memlock", "postmaster", "ok", "unlimited"});
    else if (soft < in.session_bytes + transport::kVerbsOverheadBytes)
        rows.push_back({"memlock", "postmaster", "problem",
                        fmt::format("{}, below the {} a session needs: every session falls back (memlock); "
                                    "LimitMEMLOCK=infinity in the server's systemd unit (or ulimit -l where it "
                                    "is started), then restart",
                                    kib(soft), kib(in.session_bytes + transport::kVerbsOverheadBytes))});
    else
        rows.push_back({"memlock", "postmaster", "ok",
                        fmt::format("{} (a session needs {}; each backend has its own)", kib(soft),
                                    kib(in.session_bytes + transport::kVerbsOverheadBytes))});
    if (!parse_proc_limit(limits, "Max open files", soft, unlimited)) return;
    const std::uint64_t wanted =
        static_cast<std::uint64_t>(in.max_files_per_process) + static_cast<std::uint64_t>(in.descriptors_per_session);
    if (unlimited || soft >= wanted)
        rows.push_back({"descriptors", "postmaster", "ok",
                        fmt::format("{} (max_files_per_process {} and a session's {} fit)",
                                    unlimited ? std::string("unlimited") : std::to_string(soft),
                                    in.max_files_per_process, in.descriptors_per_session)});
    else
        rows.push_back({"descriptors", "postmaster", "warning",
                        fmt::format("{}, below max_files_per_process {} plus a session's {}: a backend's RDMA "
                                    "descriptors come out of PostgreSQL's own budget; raise LimitNOFILE",
                                    soft, in.max_files_per_process, in.descriptors_per_session)});
}

void check_caps(const CheckInputs& in, std::vector<CheckRow>& rows) {
    const std::uint64_t by_memory = in.session_bytes == 0 ? 0 : in.max_unauthenticated_memory / in.session_bytes;
    const std::uint64_t at_once =
        std::min<std::uint64_t>(by_memory, static_cast<std::uint64_t>(std::max(in.max_unauthenticated_sessions, 0)));
    const std::string detail = fmt::format(
        "{} session(s) may be in RDMA setup or authentication at once (pg_rdma.max_unauthenticated_sessions {}, "
        "pg_rdma.max_unauthenticated_memory {} at {} a session); more are declined (over_cap) and stay on TCP",
        at_once, in.max_unauthenticated_sessions, kib(in.max_unauthenticated_memory), kib(in.session_bytes));
    if (at_once == 0)
        rows.push_back({"setup_caps", "server", "problem", detail + ": no session can use RDMA"});
    else
        rows.push_back({"setup_caps", "server", "ok", detail});
}

void check_client_library(const CheckInputs& in, std::vector<CheckRow>& rows) {
    if (in.client_library.empty()) {
        rows.push_back({"client_library", "''", "ok",
                        "not set: the server's own connections (replication, postgres_fdw, dblink) use TCP"});
        return;
    }
    if (access(in.client_library.c_str(), R_OK) != 0)
        rows.push_back({"client_library", in.client_library, "warning",
                        "cannot be read: the server's own connections asking for with_rsocket stay on TCP; "
                        "install pg-rdma-client or correct pg_rdma.client_library"});
    else
        rows.push_back({"client_library", in.client_library, "ok",
                        "present: the server's own connections can ask for with_rsocket"});
}

}  // namespace

bool parse_proc_limit(std::string_view text, std::string_view name, std::uint64_t& soft, bool& unlimited) {
    std::size_t at = 0;
    while (at < text.size()) {
        const std::size_t end = std::min(text.find('\n', at), text.size());
        const std::string_view line = text.substr(at, end - at);
        at = end + 1;
        if (line.substr(0, name.size()) != name) continue;
        std::istringstream fields{std::string(line.substr(name.size()))};
        std::string value;
        if (!(fields >> value)) return false;
        unlimited = value == "unlimited";
        if (unlimited) return true;
        try {
            std::size_t used = 0;
            soft = std::stoull(value, &used);
            return used == value.size();
        } catch (...) {
            return false;
        }
    }
    return false;
}

std::vector<CheckRow> check_server(const CheckInputs& in) {
    std::vector<CheckRow> rows;
    const AddressList list = parse_address_list(in.listen_addresses);
    if (!list.problem.empty())
        rows.push_back({"listen_address", in.listen_addresses, "problem", list.problem});
    else if (list.items.empty())
        rows.push_back({"listen_address", "''", "problem",
                        "pg_rdma.listen_addresses is empty: no address offers RDMA; set it to the RDMA ports' "
                        "addresses and restart"});
    for (const std::string& item : list.items) check_address(item, rows);
    check_limits(in, rows);
    check_caps(in, rows);
    check_client_library(in, rows);
    return rows;
}

}  // namespace pg_rdma::server
