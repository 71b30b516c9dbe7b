#include "libclient/preload/driver_policy.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "libclient/conninfo/precedence.hpp"
#include "libclient/conninfo/server_rules.hpp"
#include "libclient/preload/libc_calls.hpp"
#include "libclient/preload/pq_messages.hpp"
#include "libclient/preload/socket_table.hpp"

namespace pg_rdma::client {
namespace {

constexpr std::size_t kMaxServersFileBytes = 1 << 20;  // a servers file is a few lines
constexpr int kBitsPerWord = 64;
constexpr int kWords = SocketTable::kSlots / kBitsPerWord;

// Constant-initialised: usable by any wrapper before constructors run.
std::atomic<std::uint64_t> g_marks[kWords]{};
std::atomic<int> g_marked{0};
bool g_enabled = false;
conninfo::RsocketPolicy g_environment = conninfo::RsocketPolicy::Off;
const conninfo::ServerRules* g_rules = nullptr;  // never freed: used until exit

// The file's text; `exists` false when it cannot be opened. A file that
// cannot be read whole is said on stderr, and what was read stands.
std::string read_small_file(const char* path, bool& exists) {
    std::string text;
    exists = false;
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return text;
    exists = true;
    char buffer[4096];
    for (;;) {
        const ssize_t n = libc().read(fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            write_stderr(std::string("WARNING:  with_rsocket: reading the servers file ") + path + " failed: " +
                         std::strerror(errno) + "; the rules before the failure stand\n");
            break;
        }
        if (n == 0) break;
        if (text.size() + static_cast<std::size_t>(n) > kMaxServersFileBytes) {
            write_stderr(std::string("WARNING:  with_rsocket: the servers file ") + path +
                         " is larger than 1 MiB; only the rules in its first 1 MiB stand\n");
            break;
        }
        text.append(buffer, static_cast<std::size_t>(n));
    }
    libc().close(fd);
    return text;
}

// Priority after socket_table.cpp's owner (102): nothing here depends on it.
__attribute__((constructor(103))) void load_driver_policy() {
    try {
        if (const auto value = conninfo::environment_value()) {
            const conninfo::PolicyValue parsed = conninfo::parse_policy_value(*value);
            // An invalid WITH_RSOCKET fails libpq connections (precedence.hpp
            // says so); a driver's connection cannot be failed that way, so
            // it stays plain. The libpq path says why.
            if (parsed.ok()) g_environment = *parsed.policy;
        }
        const char* named = std::getenv(kServersFileVariable);
        const char* path = named != nullptr && *named != '\0' ? named : kDefaultServersFile;
        bool exists = false;
        const std::string text = read_small_file(path, exists);
        if (!exists && named != nullptr && *named != '\0')
            write_stderr(std::string("WARNING:  with_rsocket: cannot read the servers file ") + path +
                         " named by " + kServersFileVariable + "\n");
        if (exists) {
            conninfo::ParsedServerRules parsed = conninfo::parse_server_rules(text, path);
            for (const std::string& error : parsed.errors)
                write_stderr("WARNING:  with_rsocket: " + error + "; line ignored\n");
            if (!parsed.rules.empty()) g_rules = new conninfo::ServerRules(std::move(parsed.rules));
        }
    } catch (...) {
        // Out of memory at load: the driver path stays off, nothing else changes.
    }
    g_enabled = g_environment != conninfo::RsocketPolicy::Off || g_rules != nullptr;
}

}  // namespace

bool driver_path_enabled() noexcept { return g_enabled; }

conninfo::RsocketPolicy driver_policy_for(const sockaddr* peer, socklen_t len) noexcept {
    if (g_rules != nullptr)
        if (const auto policy = g_rules->match(peer, len)) return *policy;
    return g_environment;
}

std::optional<conninfo::RsocketPolicy> servers_file_policy(const sockaddr* peer, socklen_t len) noexcept {
    if (g_rules == nullptr) return std::nullopt;
    return g_rules->match(peer, len);
}

bool servers_file_has_rules() noexcept { return g_rules != nullptr; }

void mark_candidate(int fd) noexcept {
    if (fd < 0 || fd >= SocketTable::kSlots) return;
    const std::uint64_t bit = std::uint64_t{1} << (fd % kBitsPerWord);
    if ((g_marks[fd / kBitsPerWord].fetch_or(bit, std::memory_order_acq_rel) & bit) == 0)
        g_marked.fetch_add(1, std::memory_order_acq_rel);
}

bool is_candidate(int fd) noexcept {
    if (fd < 0 || fd >= SocketTable::kSlots || g_marked.load(std::memory_order_acquire) == 0) return false;
    const std::uint64_t bit = std::uint64_t{1} << (fd % kBitsPerWord);
    return (g_marks[fd / kBitsPerWord].load(std::memory_order_acquire) & bit) != 0;
}

bool take_candidate(int fd) noexcept {
    if (!is_candidate(fd)) return false;
    const std::uint64_t bit = std::uint64_t{1} << (fd % kBitsPerWord);
    if ((g_marks[fd / kBitsPerWord].fetch_and(~bit, std::memory_order_acq_rel) & bit) == 0) return false;
    g_marked.fetch_sub(1, std::memory_order_acq_rel);
    return true;
}

void drop_candidates(unsigned first, unsigned last) noexcept {
    if (g_marked.load(std::memory_order_acquire) == 0) return;
    const unsigned top = last < static_cast<unsigned>(SocketTable::kSlots) ? last : SocketTable::kSlots - 1u;
    for (unsigned fd = first; fd <= top; ++fd) {
        (void)take_candidate(static_cast<int>(fd));
        if (fd == top) break;  // top may be UINT_MAX's clamp: no wrap
    }
}

bool any_candidates() noexcept { return g_marked.load(std::memory_order_acquire) != 0; }

}  // namespace pg_rdma::client
