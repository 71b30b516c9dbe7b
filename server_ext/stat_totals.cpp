#include "server_ext/stat_totals.hpp"

#include <algorithm>
#include <cstring>

#include "server_ext/pg_headers.hpp"

namespace pg_rdma::server {
namespace {

constexpr const char* kShmemName = "pg_rdma cumulative counters";

struct SharedOutcome {
    pg_atomic_uint64 sessions;
    pg_atomic_uint64 last_at;  // TimestampTz as unsigned; 0 when never
    // The log line's rate limit (never reset by pg_stat_reset_rdma).
    pg_atomic_uint64 last_logged;  // TimestampTz as unsigned
    pg_atomic_uint64 unlogged;     // sessions since the last line
};

struct SharedDevice {
    // Set once under `names_lock`, never changed or cleared after (a reset
    // zeroes the counters and keeps the rows): readers need no lock.
    pg_atomic_uint32 named;
    char name[kDeviceNameSize];
    pg_atomic_uint64 sessions;
    pg_atomic_uint64 failovers;
    pg_atomic_uint64 bytes_sent;
    pg_atomic_uint64 bytes_received;
};

struct Totals {
    slock_t names_lock;  // taken only to name a new device row
    pg_atomic_uint64 reset_at;
    SharedOutcome outcomes[kOutcomeCount];
    SharedDevice devices[kMaxDevices];
};

Totals* shared = nullptr;
shmem_request_hook_type prev_shmem_request_hook = nullptr;
shmem_startup_hook_type prev_shmem_startup_hook = nullptr;

void request_shmem() {
    if (prev_shmem_request_hook != nullptr) prev_shmem_request_hook();
    RequestAddinShmemSpace(sizeof(Totals));
}

void zero_counters(Totals& t) {
    for (SharedOutcome& o : t.outcomes) {
        pg_atomic_write_u64(&o.sessions, 0);
        pg_atomic_write_u64(&o.last_at, 0);
    }
    for (SharedDevice& d : t.devices) {
        pg_atomic_write_u64(&d.sessions, 0);
        pg_atomic_write_u64(&d.failovers, 0);
        pg_atomic_write_u64(&d.bytes_sent, 0);
        pg_atomic_write_u64(&d.bytes_received, 0);
    }
    pg_atomic_write_u64(&t.reset_at, static_cast<std::uint64_t>(GetCurrentTimestamp()));
}

void startup_shmem() {
    if (prev_shmem_startup_hook != nullptr) prev_shmem_startup_hook();
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    bool found = false;
    shared = static_cast<Totals*>(ShmemInitStruct(kShmemName, sizeof(Totals), &found));
    if (!found) {
        SpinLockInit(&shared->names_lock);
        pg_atomic_init_u64(&shared->reset_at, 0);
        for (SharedOutcome& o : shared->outcomes) {
            pg_atomic_init_u64(&o.sessions, 0);
            pg_atomic_init_u64(&o.last_at, 0);
            pg_atomic_init_u64(&o.last_logged, 0);
            pg_atomic_init_u64(&o.unlogged, 0);
        }
        for (SharedDevice& d : shared->devices) {
            pg_atomic_init_u32(&d.named, 0);
            std::memset(d.name, 0, sizeof d.name);
            pg_atomic_init_u64(&d.sessions, 0);
            pg_atomic_init_u64(&d.failovers, 0);
            pg_atomic_init_u64(&d.bytes_sent, 0);
            pg_atomic_init_u64(&d.bytes_received, 0);
        }
        // Counted from the server's start (or its crash-restart).
        pg_atomic_write_u64(&shared->reset_at, static_cast<std::uint64_t>(GetCurrentTimestamp()));
    }
    LWLockRelease(AddinShmemInitLock);
}

// The row of `device`, naming a free one for a device not seen yet;
// nullptr when every row names another device, or for no name.
SharedDevice* device_row(std::string_view device) {
    if (shared == nullptr || device.empty()) return nullptr;
    device = device.substr(0, kDeviceNameSize - 1);
    auto matches = [&](SharedDevice& d) {
        if (pg_atomic_read_u32(&d.named) == 0) return false;
        pg_read_barrier();  // the name was written before `named`
        return std::string_view(d.name, strnlen(d.name, sizeof d.name)) == device;
    };
    for (SharedDevice& d : shared->devices)
        if (matches(d)) return &d;
    SharedDevice* row = nullptr;
    SpinLockAcquire(&shared->names_lock);
    for (SharedDevice& d : shared->devices) {
        if (matches(d)) {
            row = &d;
            break;
        }
        if (pg_atomic_read_u32(&d.named) == 0) {
            std::memcpy(d.name, device.data(), device.size());
            d.name[device.size()] = '\0';
            pg_write_barrier();
            pg_atomic_write_u32(&d.named, 1);
            row = &d;
            break;
        }
    }
    SpinLockRelease(&shared->names_lock);
    return row;
}

}  // namespace

void install_stat_totals_hooks() {
    prev_shmem_request_hook = shmem_request_hook;
    shmem_request_hook = request_shmem;
    prev_shmem_startup_hook = shmem_startup_hook;
    shmem_startup_hook = startup_shmem;
}

void count_outcome(Outcome outcome) {
    const auto i = static_cast<std::size_t>(outcome);
    if (shared == nullptr || i >= kOutcomeCount) return;
    pg_atomic_fetch_add_u64(&shared->outcomes[i].sessions, 1);
    // Only ever forward: two backends may count at once.
    const auto now = static_cast<std::uint64_t>(GetCurrentTimestamp());
    std::uint64_t last = pg_atomic_read_u64(&shared->outcomes[i].last_at);
    while (last < now && !pg_atomic_compare_exchange_u64(&shared->outcomes[i].last_at, &last, now)) {
    }
}

void count_device_session(std::string_view device) {
    if (SharedDevice* d = device_row(device)) pg_atomic_fetch_add_u64(&d->sessions, 1);
}

void count_device_bytes(std::string_view device, std::uint64_t sent, std::uint64_t received) {
    if (SharedDevice* d = device_row(device)) {
        pg_atomic_fetch_add_u64(&d->bytes_sent, sent);
        pg_atomic_fetch_add_u64(&d->bytes_received, received);
    }
}

void count_device_failover(std::string_view device) {
    if (SharedDevice* d = device_row(device)) pg_atomic_fetch_add_u64(&d->failovers, 1);
}

void reset_stat_totals() {
    if (shared != nullptr) zero_counters(*shared);
}

bool outcome_log_due(Outcome outcome, std::uint64_t& since) {
    since = 0;
    const auto i = static_cast<std::size_t>(outcome);
    if (shared == nullptr || i >= kOutcomeCount) return true;  // nothing to limit with: log
    SharedOutcome& o = shared->outcomes[i];
    pg_atomic_fetch_add_u64(&o.unlogged, 1);
    const auto now = static_cast<std::uint64_t>(GetCurrentTimestamp());
    std::uint64_t last = pg_atomic_read_u64(&o.last_logged);
    if (last != 0 && now - last < static_cast<std::uint64_t>(kOutcomeLogIntervalSeconds * USECS_PER_SEC)) return false;
    // One backend wins the interval; the others' sessions are counted in
    // the next line.
    if (!pg_atomic_compare_exchange_u64(&o.last_logged, &last, now)) return false;
    const std::uint64_t counted = pg_atomic_exchange_u64(&o.unlogged, 0);
    since = counted > 0 ? counted - 1 : 0;  // this session is the line itself
    return true;
}

bool stat_totals_ready() { return shared != nullptr; }

OutcomeTotals read_outcome_totals(Outcome outcome) {
    const auto i = static_cast<std::size_t>(outcome);
    if (shared == nullptr || i >= kOutcomeCount) return {0, 0};
    return {pg_atomic_read_u64(&shared->outcomes[i].sessions),
            static_cast<std::int64_t>(pg_atomic_read_u64(&shared->outcomes[i].last_at))};
}

bool read_device_totals(std::size_t index, DeviceTotals& out) {
    if (shared == nullptr || index >= kMaxDevices) return false;
    SharedDevice& d = shared->devices[index];
    if (pg_atomic_read_u32(&d.named) == 0) return false;
    pg_read_barrier();
    std::memcpy(out.name, d.name, sizeof out.name);
    out.name[sizeof out.name - 1] = '\0';
    out.sessions = pg_atomic_read_u64(&d.sessions);
    out.failovers = pg_atomic_read_u64(&d.failovers);
    out.bytes_sent = pg_atomic_read_u64(&d.bytes_sent);
    out.bytes_received = pg_atomic_read_u64(&d.bytes_received);
    return true;
}

std::int64_t stat_totals_reset_at() {
    return shared != nullptr ? static_cast<std::int64_t>(pg_atomic_read_u64(&shared->reset_at)) : 0;
}

}  // namespace pg_rdma::server
