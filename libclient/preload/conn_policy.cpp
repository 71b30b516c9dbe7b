#include "libclient/preload/conn_policy.hpp"

#include <array>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "libclient/preload/libpq_calls.hpp"

namespace pg_rdma::client {
namespace {

// What is known of one PGconn. Nodes of an unordered_map stay put until
// erased, so an answer's characters stay where a caller was told they are.
struct Record {
    PolicyChoice choice;
    const LibpqCalls* calls = nullptr;  // the libpq copy that made the PGconn
    std::string fallback;  // the last attempt's reason for staying on TCP
    std::string rule;      // what a servers file rule asked for
    // Every answer given, kept until PQfinish: a caller may hold an earlier
    // one (after a failover or PQreset the answer changes). A few short
    // strings per slot at most.
    std::array<std::list<std::string>, kAnswerSlots> answers;
};

std::mutex g_mutex;
std::unordered_map<const PGconn*, Record>& registry() {
    static auto* map = new std::unordered_map<const PGconn*, Record>;  // never destroyed: used at exit
    return *map;
}

__attribute__((tls_model("initial-exec"))) thread_local int t_start_depth = 0;
__attribute__((tls_model("initial-exec"))) thread_local const PolicyChoice* t_start_choice = nullptr;
__attribute__((tls_model("initial-exec"))) thread_local RsocketPolicy t_active = RsocketPolicy::Off;

}  // namespace

std::optional<PolicyChoice> choice_of(const PGconn* conn) {
    std::lock_guard lock(g_mutex);
    auto& map = registry();
    if (auto it = map.find(conn); it != map.end()) return it->second.choice;
    // Registered whatever it asks for, off included: a connection that said
    // with_rsocket=false must stay plain in every later PQconnectPoll too.
    if (t_start_depth == 0 || t_start_choice == nullptr) return std::nullopt;
    // Registered inside a wrapper, which has set the caller's libpq.
    map.emplace(conn, Record{*t_start_choice, &libpq(), {}, {}, {}});
    return *t_start_choice;
}

std::optional<std::string> value_of(const PGconn* conn) {
    std::lock_guard lock(g_mutex);
    auto& map = registry();
    if (auto it = map.find(conn); it != map.end() && it->second.choice.policy != RsocketPolicy::Off)
        return it->second.choice.value;
    return std::nullopt;
}

namespace {

// Sets one of the record's texts (out of memory: it stays as it was).
void note_text(const PGconn* conn, std::string Record::*field, std::string_view text) noexcept {
    try {
        std::lock_guard lock(g_mutex);
        auto& map = registry();
        if (auto it = map.find(conn); it != map.end()) (it->second.*field).assign(text);
    } catch (...) {
    }
}

std::optional<std::string> text_of(const PGconn* conn, std::string Record::*field) {
    std::lock_guard lock(g_mutex);
    auto& map = registry();
    if (auto it = map.find(conn); it != map.end() && !(it->second.*field).empty()) return it->second.*field;
    return std::nullopt;
}

}  // namespace

// Out of memory, the reason is not kept (the warning still went out) or
// "requested" says what the connection string did.
void note_fallback(const PGconn* conn, std::string_view reason) noexcept { note_text(conn, &Record::fallback, reason); }
std::optional<std::string> fallback_of(const PGconn* conn) { return text_of(conn, &Record::fallback); }
void note_rule(const PGconn* conn, std::string_view value) noexcept { note_text(conn, &Record::rule, value); }
std::optional<std::string> rule_of(const PGconn* conn) { return text_of(conn, &Record::rule); }

const LibpqCalls* calls_of(const PGconn* conn) {
    std::lock_guard lock(g_mutex);
    auto& map = registry();
    auto it = map.find(conn);
    return it != map.end() ? it->second.calls : nullptr;
}

const char* keep_answer(const PGconn* conn, std::size_t slot, std::string_view answer) noexcept {
    try {
        std::lock_guard lock(g_mutex);
        auto& map = registry();
        auto it = map.find(conn);
        if (it == map.end() || slot >= kAnswerSlots) return nullptr;
        std::list<std::string>& kept = it->second.answers[slot];
        for (const std::string& earlier : kept)
            if (earlier == answer) return earlier.c_str();
        return kept.emplace_back(answer).c_str();
    } catch (...) {
        return nullptr;
    }
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
