#include "libclient/preload/conn_policy.hpp"

#include <mutex>
#include <unordered_map>

namespace pg_rdma::client {
namespace {

std::mutex g_mutex;
std::unordered_map<const PGconn*, RsocketPolicy>& registry() {
    static auto* map = new std::unordered_map<const PGconn*, RsocketPolicy>;  // never destroyed: used at exit
    return *map;
}

__attribute__((tls_model("initial-exec"))) thread_local int t_start_depth = 0;
__attribute__((tls_model("initial-exec"))) thread_local RsocketPolicy t_start_policy = RsocketPolicy::Off;
__attribute__((tls_model("initial-exec"))) thread_local RsocketPolicy t_active = RsocketPolicy::Off;

}  // namespace

RsocketPolicy policy_of(const PGconn* conn) {
    std::lock_guard lock(g_mutex);
    auto& map = registry();
    if (auto it = map.find(conn); it != map.end()) return it->second;
    if (t_start_depth == 0 || t_start_policy == RsocketPolicy::Off) return RsocketPolicy::Off;
    map.emplace(conn, t_start_policy);
    return t_start_policy;
}

void forget(const PGconn* conn) noexcept {
    std::lock_guard lock(g_mutex);
    registry().erase(conn);
}

StartScope::StartScope(RsocketPolicy policy) noexcept {
    if (t_start_depth++ == 0) t_start_policy = policy;
}
StartScope::~StartScope() {
    if (--t_start_depth == 0) t_start_policy = RsocketPolicy::Off;
}
bool StartScope::active() noexcept { return t_start_depth > 0; }

namespace {
thread_local const char* t_refusal = nullptr;  // a string literal, or null
}  // namespace

ActivePolicy::ActivePolicy(RsocketPolicy policy) noexcept {
    t_active = policy;
    t_refusal = nullptr;
}
void ActivePolicy::refuse(const char* why) noexcept { t_refusal = why; }
const char* ActivePolicy::refusal() noexcept { return t_refusal; }
ActivePolicy::~ActivePolicy() { t_active = RsocketPolicy::Off; }
RsocketPolicy ActivePolicy::current() noexcept { return t_active; }

}  // namespace pg_rdma::client
