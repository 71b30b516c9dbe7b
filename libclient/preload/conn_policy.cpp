#include "libclient/preload/conn_policy.hpp"

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace pg_rdma::client {
namespace {

std::mutex g_mutex;
std::unordered_map<const PGconn*, PolicyChoice>& registry() {
    static auto* map = new std::unordered_map<const PGconn*, PolicyChoice>;  // never destroyed: used at exit
    return *map;
}

__attribute__((tls_model("initial-exec"))) thread_local int t_start_depth = 0;
__attribute__((tls_model("initial-exec"))) thread_local const PolicyChoice* t_start_choice = nullptr;
__attribute__((tls_model("initial-exec"))) thread_local RsocketPolicy t_active = RsocketPolicy::Off;

}  // namespace

std::optional<PolicyChoice> choice_of(const PGconn* conn) {
    std::lock_guard lock(g_mutex);
    auto& map = registry();
    if (auto it = map.find(conn); it != map.end()) return it->second;
    // Registered whatever it asks for, off included: a connection that said
    // with_rsocket=false must stay plain in every later PQconnectPoll too.
    if (t_start_depth == 0 || t_start_choice == nullptr) return std::nullopt;
    map.emplace(conn, *t_start_choice);
    return *t_start_choice;
}

std::optional<std::string> value_of(const PGconn* conn) {
    std::lock_guard lock(g_mutex);
    auto& map = registry();
    if (auto it = map.find(conn); it != map.end() && it->second.policy != RsocketPolicy::Off) return it->second.value;
    return std::nullopt;
}

void forget(const PGconn* conn) noexcept {
    std::lock_guard lock(g_mutex);
    registry().erase(conn);
}

StartScope::StartScope(const PolicyChoice& choice) noexcept {
    if (t_start_depth++ == 0) t_start_choice = &choice;
}
StartScope::~StartScope() {
    if (--t_start_depth == 0) t_start_choice = nullptr;
}
bool StartScope::active() noexcept { return t_start_depth > 0; }

namespace {
thread_local const char* t_refusal = nullptr;  // a string literal, or null
__attribute__((tls_model("initial-exec"))) thread_local int t_inside = 0;
__attribute__((tls_model("initial-exec"))) thread_local bool t_servers_file = false;
}  // namespace

ActivePolicy::ActivePolicy(RsocketPolicy policy, bool servers_file_decides) noexcept {
    t_active = policy;
    t_servers_file = servers_file_decides;
    t_refusal = nullptr;
    ++t_inside;
}
void ActivePolicy::refuse(const char* why) noexcept { t_refusal = why; }
const char* ActivePolicy::refusal() noexcept { return t_refusal; }
ActivePolicy::~ActivePolicy() {
    t_active = RsocketPolicy::Off;
    t_servers_file = false;
    --t_inside;
}
bool ActivePolicy::inside() noexcept { return t_inside > 0; }
bool ActivePolicy::servers_file_decides() noexcept { return t_servers_file; }
RsocketPolicy ActivePolicy::current() noexcept { return t_active; }

}  // namespace pg_rdma::client
