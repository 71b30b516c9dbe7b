#include "server_ext/outgoing_slots.hpp"

#include <algorithm>
#include <cstring>

#include "server_ext/pg_headers.hpp"

namespace pg_rdma::server {
namespace {

constexpr const char* kShmemName = "pg_rdma pg_stat_rdma_outgoing slots";

// The shared block: this header, then `count` rows (pid 0: free).
struct alignas(alignof(std::max_align_t)) OutgoingArray {
    slock_t lock;
    int count;
    OutgoingRow* rows() { return reinterpret_cast<OutgoingRow*>(this + 1); }
};
static_assert(alignof(OutgoingRow) <= alignof(OutgoingArray), "rows follow the header unpadded");

OutgoingArray* shared = nullptr;
bool exit_callback_registered = false;
shmem_request_hook_type prev_shmem_request_hook = nullptr;
shmem_startup_hook_type prev_shmem_startup_hook = nullptr;

int slot_count() { return MaxBackends * kOutgoingSlotsPerBackend; }

Size array_size(int count) {
    return add_size(sizeof(OutgoingArray), mul_size(static_cast<Size>(count), sizeof(OutgoingRow)));
}

void request_shmem() {
    if (prev_shmem_request_hook != nullptr) prev_shmem_request_hook();
    RequestAddinShmemSpace(array_size(slot_count()));
}

void startup_shmem() {
    if (prev_shmem_startup_hook != nullptr) prev_shmem_startup_hook();
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    bool found = false;
    shared = static_cast<OutgoingArray*>(ShmemInitStruct(kShmemName, array_size(slot_count()), &found));
    if (!found) {
        SpinLockInit(&shared->lock);
        shared->count = slot_count();
        std::memset(shared->rows(), 0, sizeof(OutgoingRow) * static_cast<std::size_t>(shared->count));
    }
    LWLockRelease(AddinShmemInitLock);
}

template <std::size_t N>
void copy_cut(char (&field)[N], std::string_view text) {
    const auto n = std::min(text.size(), sizeof field - 1);
    std::memcpy(field, text.data(), n);
    field[n] = '\0';
}

// Whatever this process still holds when it exits.
void release_all_at_exit(int, Datum) {
    if (shared == nullptr) return;
    SpinLockAcquire(&shared->lock);
    for (int i = 0; i < shared->count; ++i)
        if (shared->rows()[i].pid == MyProcPid) shared->rows()[i].pid = 0;
    SpinLockRelease(&shared->lock);
}

}  // namespace

void install_outgoing_slot_hooks() {
    prev_shmem_request_hook = shmem_request_hook;
    shmem_request_hook = request_shmem;
    prev_shmem_startup_hook = shmem_startup_hook;
    shmem_startup_hook = startup_shmem;
}

int claim_outgoing_slot(const OutgoingIdentity& id) {
    if (shared == nullptr || MyProcPid == 0) return -1;
    // Filled outside the lock, copied in under it.
    OutgoingRow row{};
    row.pid = MyProcPid;
    copy_cut(row.remote_addr, id.remote_addr);
    row.remote_port = id.remote_port;
    row.transport = id.transport;
    copy_cut(row.device, id.device);
    copy_cut(row.requested, id.requested);
    copy_cut(row.reason, id.reason);
    row.role = id.role;
    row.connected_at = GetCurrentTimestamp();
    int index = -1;
    SpinLockAcquire(&shared->lock);
    for (int i = 0; i < shared->count && index < 0; ++i)
        if (shared->rows()[i].pid == 0) {
            shared->rows()[i] = row;
            index = i;
        }
    SpinLockRelease(&shared->lock);
    if (index >= 0 && !exit_callback_registered) {
        on_proc_exit(release_all_at_exit, 0);
        exit_callback_registered = true;
    }
    return index;
}

void release_outgoing_slot(int index) {
    if (shared == nullptr || index < 0 || index >= shared->count) return;
    SpinLockAcquire(&shared->lock);
    if (shared->rows()[index].pid == MyProcPid) shared->rows()[index].pid = 0;
    SpinLockRelease(&shared->lock);
}

int outgoing_slot_count() { return shared != nullptr ? shared->count : 0; }

bool read_outgoing_slot(int index, OutgoingRow& out) {
    if (shared == nullptr || index < 0 || index >= shared->count) return false;
    SpinLockAcquire(&shared->lock);
    out = shared->rows()[index];
    SpinLockRelease(&shared->lock);
    return out.pid != 0;
}

}  // namespace pg_rdma::server
