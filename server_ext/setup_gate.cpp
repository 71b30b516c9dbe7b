// Places are claimed without a lock: a backend before InitProcess has no
// PGPROC and must not wait on an LWLock (PostgreSQL PANICs when one has to),
// and a spinlock must not be held across the kill() that tells a dead
// holder. So each place is claimed by compare-and-swap; the memory cap is
// checked after claiming, each claimant writing its bytes before summing
// the others' (with a full barrier between), so of two racing claimants at
// least one sees the other: the cap can refuse a session too many, and
// admits one too many only when a sum reads a place in the instant between
// its claim and its bytes (it then counts the previous holder's, of the
// same size unless the settings changed at a restart).
#include "server_ext/setup_gate.hpp"

#include <signal.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <ctime>

#include "server_ext/pg_headers.hpp"

namespace pg_rdma::server {
namespace {

constexpr const char* kShmemName = "pg_rdma unauthenticated sessions";
constexpr int kSessionsAsMaxConnections = -1;  // the default: as many as max_connections
constexpr int kMaxMaxSessions = 100'000;
constexpr int kDefaultMaxMemoryKiB = 1024 * 1024;  // 1 GB
constexpr int kBytesPerKiB = 1024;
constexpr long kDeclineLogIntervalSeconds = 10;
// Past authentication_timeout a startup is over (PostgreSQL ends it); a
// place older than twice that is a leftover whatever its pid says.
constexpr int kStaleAfterAuthenticationTimeouts = 2;

int max_sessions = kSessionsAsMaxConnections;
int max_memory_kib = kDefaultMaxMemoryKiB;

// Who holds a place and since when, in one word so that a claim and its
// time change together: the holder's pid in the high half, the claim's
// time (seconds of CLOCK_MONOTONIC, one clock for every process and never
// stepped) in the low half; 0 when free.
struct Place {
    pg_atomic_uint64 holder;
    pg_atomic_uint64 pinned;  // bytes
};

constexpr int kPidShift = 32;
constexpr std::uint64_t kSecondsMask = 0xFFFF'FFFFull;

std::uint64_t holder_word(pid_t pid, std::int64_t seconds) {
    return (static_cast<std::uint64_t>(pid) << kPidShift) | (static_cast<std::uint64_t>(seconds) & kSecondsMask);
}

std::int64_t monotonic_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec);
}
pid_t holder_pid(std::uint64_t word) { return static_cast<pid_t>(word >> kPidShift); }
std::int64_t holder_since(std::uint64_t word) { return static_cast<std::int64_t>(word & kSecondsMask); }

struct alignas(alignof(std::max_align_t)) Gate {
    int count;
    pg_atomic_uint64 last_logged;     // TimestampTz
    pg_atomic_uint64 declined_since;  // declines since that log line
    Place* places() { return reinterpret_cast<Place*>(this + 1); }
};
static_assert(alignof(Place) <= alignof(Gate), "places follow the header unpadded");

Gate* gate = nullptr;
Place* my_place = nullptr;
shmem_request_hook_type prev_shmem_request_hook = nullptr;
shmem_startup_hook_type prev_shmem_startup_hook = nullptr;

Size gate_size(int count) { return add_size(sizeof(Gate), mul_size(static_cast<Size>(count), sizeof(Place))); }

// Known once the configuration is read (in the postmaster, before shared
// memory): a pool may open as many sessions at once as PostgreSQL admits.
int place_count() { return max_sessions == kSessionsAsMaxConnections ? MaxConnections : max_sessions; }

void request_shmem() {
    if (prev_shmem_request_hook != nullptr) prev_shmem_request_hook();
    RequestAddinShmemSpace(gate_size(place_count()));
}

void startup_shmem() {
    if (prev_shmem_startup_hook != nullptr) prev_shmem_startup_hook();
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    bool found = false;
    const int count = place_count();
    gate = static_cast<Gate*>(ShmemInitStruct(kShmemName, gate_size(count), &found));
    if (!found) {
        gate->count = count;
        pg_atomic_init_u64(&gate->last_logged, 0);
        pg_atomic_init_u64(&gate->declined_since, 0);
        for (int i = 0; i < count; ++i) {
            Place& p = gate->places()[i];
            pg_atomic_init_u64(&p.holder, 0);
            pg_atomic_init_u64(&p.pinned, 0);
        }
    }
    LWLockRelease(AddinShmemInitLock);
}

std::uint64_t max_memory_bytes() { return static_cast<std::uint64_t>(max_memory_kib) * kBytesPerKiB; }

// A holder that is gone, or has held its place past any startup's end.
bool is_leftover(std::uint64_t holder, std::int64_t now_seconds) {
    const std::int64_t stale_after = static_cast<std::int64_t>(AuthenticationTimeout) * kStaleAfterAuthenticationTimeouts;
    // Both in the low 32 bits of the same clock: the difference mod 2^32.
    const std::int64_t held = (now_seconds - holder_since(holder)) & static_cast<std::int64_t>(kSecondsMask);
    if (held > stale_after && held < static_cast<std::int64_t>(kSecondsMask / 2)) return true;
    return kill(holder_pid(holder), 0) != 0 && errno == ESRCH;
}

// Frees leftovers, and returns the pinned bytes of the places held by others.
std::uint64_t sweep(std::int64_t now_seconds) {
    std::uint64_t pinned = 0;
    for (int i = 0; i < gate->count; ++i) {
        Place& p = gate->places()[i];
        if (&p == my_place) continue;
        std::uint64_t holder = pg_atomic_read_u64(&p.holder);
        if (holder == 0) continue;
        if (is_leftover(holder, now_seconds)) {
            // Fails harmlessly if the place changed hands meanwhile.
            (void)pg_atomic_compare_exchange_u64(&p.holder, &holder, 0);
            continue;
        }
        pinned += pg_atomic_read_u64(&p.pinned);
    }
    return pinned;
}

void refuse(GateRefusal& r, TimestampTz now, const char* why) {
    snprintf(r.why, sizeof r.why, "%s", why);
    const std::uint64_t declined = pg_atomic_add_fetch_u64(&gate->declined_since, 1);
    std::uint64_t last = pg_atomic_read_u64(&gate->last_logged);
    if (now - static_cast<TimestampTz>(last) < kDeclineLogIntervalSeconds * USECS_PER_SEC) return;
    if (!pg_atomic_compare_exchange_u64(&gate->last_logged, &last, static_cast<std::uint64_t>(now))) return;
    r.log_now = true;
    r.declined_since = declined;
    (void)pg_atomic_sub_fetch_u64(&gate->declined_since, declined);
}

}  // namespace

void define_setup_gate_gucs() {
    DefineCustomIntVariable("pg_rdma.max_unauthenticated_sessions",
                            "Most RDMA sessions the server holds for clients that have not authenticated yet.",
                            "Counts sessions from their RDMA setup until authentication ends. A client over "
                            "the limit is declined and continues on TCP. -1: max_connections.",
                            &max_sessions,
                            max_sessions,
                            kSessionsAsMaxConnections,
                            kMaxMaxSessions,
                            PGC_POSTMASTER,
                            0,
                            nullptr,
                            nullptr,
                            nullptr);
    DefineCustomIntVariable("pg_rdma.max_unauthenticated_memory",
                            "Most memory the server pins for RDMA sessions of clients not yet authenticated.",
                            "Each session pins its receive ring (pg_rdma.rx_buffer_size) and staging buffers. A "
                            "client over the limit is declined and continues on TCP.",
                            &max_memory_kib,
                            max_memory_kib,
                            1,
                            INT_MAX,
                            PGC_POSTMASTER,
                            GUC_UNIT_KB,
                            nullptr,
                            nullptr,
                            nullptr);
}

void install_setup_gate_hooks() {
    prev_shmem_request_hook = shmem_request_hook;
    shmem_request_hook = request_shmem;
    prev_shmem_startup_hook = shmem_startup_hook;
    shmem_startup_hook = startup_shmem;
}

const char* setup_gate_problem(std::uint64_t session_pinned_bytes) {
    if (session_pinned_bytes <= max_memory_bytes()) return nullptr;
    static char problem[256];
    snprintf(problem, sizeof problem,
             "max_unauthenticated_memory (%d kB) is less than one session pins (%llu kB with this "
             "rx_buffer_size): no session could use RDMA",
             max_memory_kib, static_cast<unsigned long long>(session_pinned_bytes / kBytesPerKiB));
    return problem;
}

bool enter_setup_gate(std::uint64_t pinned_bytes, GateRefusal& refusal) {
    if (gate == nullptr) return true;  // not preloaded: no session reaches here
    if (my_place != nullptr) return true;
    const TimestampTz now = GetCurrentTimestamp();
    const std::int64_t now_seconds = monotonic_seconds();
    (void)sweep(now_seconds);
    const std::uint64_t mine = holder_word(MyProcPid, now_seconds);
    for (int i = 0; i < gate->count && my_place == nullptr; ++i) {
        Place& p = gate->places()[i];
        std::uint64_t expected = 0;
        if (pg_atomic_compare_exchange_u64(&p.holder, &expected, mine)) my_place = &p;
    }
    if (my_place == nullptr) {
        char why[160];
        snprintf(why, sizeof why,
                 "%d sessions are in RDMA setup or not yet authenticated (pg_rdma.max_unauthenticated_sessions; "
                 "-1 is max_connections)",
                 gate->count);
        refuse(refusal, now, why);
        return false;
    }
    // Until this write a sum counts the place's previous holder's bytes.
    pg_atomic_write_u64(&my_place->pinned, pinned_bytes);
    pg_memory_barrier();
    const std::uint64_t others = sweep(now_seconds);
    if (others + pinned_bytes > max_memory_bytes()) {
        leave_setup_gate();
        char why[200];
        snprintf(why, sizeof why,
                 "sessions not yet authenticated pin %llu kB, and this one would pin %llu kB more "
                 "(pg_rdma.max_unauthenticated_memory = %d kB)",
                 static_cast<unsigned long long>(others / kBytesPerKiB),
                 static_cast<unsigned long long>(pinned_bytes / kBytesPerKiB), max_memory_kib);
        refuse(refusal, now, why);
        return false;
    }
    return true;
}

void count_decline(const char* why, GateRefusal& refusal) {
    if (gate == nullptr) {  // not preloaded: no session reaches here
        snprintf(refusal.why, sizeof refusal.why, "%s", why);
        refusal.log_now = true;
        refusal.declined_since = 1;
        return;
    }
    refuse(refusal, GetCurrentTimestamp(), why);
}

SetupCaps setup_caps() { return {place_count(), max_memory_bytes()}; }

void leave_setup_gate() {
    if (my_place == nullptr) return;
    // Whoever holds it now (a sweep may have judged this process gone, and
    // another claimed it since): only our own claim is given back.
    std::uint64_t holder = pg_atomic_read_u64(&my_place->holder);
    if (holder_pid(holder) == MyProcPid) (void)pg_atomic_compare_exchange_u64(&my_place->holder, &holder, 0);
    my_place = nullptr;
}

}  // namespace pg_rdma::server
