// Consistency without locks, as stat_slots.cpp keeps pg_stat_rdma's rows
// (after PgBackendStatus's st_changecount): a slot is claimed by a
// compare-and-swap on `in_use`, only its owner writes it, bumping
// `changecount` before and after (odd while it writes); a reader copies
// the row between two equal, even reads of the count. Nothing waits on a
// lock, and a process that dies mid-write leaves no lock held.
#include "server_ext/outgoing_slots.hpp"

#include <algorithm>
#include <cstring>

#include "server_ext/pg_headers.hpp"

namespace pg_rdma::server {
namespace {

constexpr std::uint32_t kSlotFree = 0;
constexpr std::uint32_t kSlotClaimed = 1;
constexpr const char* kShmemName = "pg_rdma pg_stat_rdma_outgoing slots";
// This process's claimed slots, released at exit without a scan; more
// connections at once than this get no row.
constexpr int kMaxOwned = 64;

struct Slot {
    pg_atomic_uint32 in_use;
    int changecount;
    OutgoingRow row;  // pid 0 while claimed but not yet filled
};

// The shared block: this header, then `count` slots.
struct alignas(alignof(std::max_align_t)) SlotArray {
    int count;
    Slot* slots() { return reinterpret_cast<Slot*>(this + 1); }
};
static_assert(alignof(Slot) <= alignof(SlotArray), "slots follow the header unpadded");

SlotArray* shared = nullptr;
int owned[kMaxOwned];
int owned_count = 0;
bool exit_callback_registered = false;
shmem_request_hook_type prev_shmem_request_hook = nullptr;
shmem_startup_hook_type prev_shmem_startup_hook = nullptr;

int slot_count() { return MaxBackends * kOutgoingSlotsPerBackend; }

Size array_size(int count) {
    return add_size(sizeof(SlotArray), mul_size(static_cast<Size>(count), sizeof(Slot)));
}

void request_shmem() {
    if (prev_shmem_request_hook != nullptr) prev_shmem_request_hook();
    RequestAddinShmemSpace(array_size(slot_count()));
}

void startup_shmem() {
    if (prev_shmem_startup_hook != nullptr) prev_shmem_startup_hook();
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    bool found = false;
    shared = static_cast<SlotArray*>(ShmemInitStruct(kShmemName, array_size(slot_count()), &found));
    if (!found) {
        shared->count = slot_count();
        for (int i = 0; i < shared->count; ++i) {
            Slot& s = shared->slots()[i];
            pg_atomic_init_u32(&s.in_use, kSlotFree);
            s.changecount = 0;
            std::memset(&s.row, 0, sizeof s.row);
        }
    }
    LWLockRelease(AddinShmemInitLock);
}

template <std::size_t N>
void copy_cut(char (&field)[N], std::string_view text) {
    const auto n = std::min(text.size(), sizeof field - 1);
    std::memcpy(field, text.data(), n);
    field[n] = '\0';
}

// The owner's write: count odd, change, count even.
void write_slot(Slot& slot, const OutgoingRow& row) {
    volatile Slot* s = &slot;
    s->changecount = s->changecount + 1;
    pg_write_barrier();
    slot.row = row;
    pg_write_barrier();
    s->changecount = s->changecount + 1;
}

void free_slot(int index) {
    Slot& slot = shared->slots()[index];
    OutgoingRow empty{};
    write_slot(slot, empty);
    pg_write_barrier();
    pg_atomic_write_u32(&slot.in_use, kSlotFree);
}

void release_all_at_exit(int, Datum) {
    for (int i = 0; i < owned_count; ++i) free_slot(owned[i]);
    owned_count = 0;
}

}  // namespace

void install_outgoing_slot_hooks() {
    prev_shmem_request_hook = shmem_request_hook;
    shmem_request_hook = request_shmem;
    prev_shmem_startup_hook = shmem_startup_hook;
    shmem_startup_hook = startup_shmem;
}

void prepare_outgoing_slots() {
    if (exit_callback_registered || shared == nullptr) return;
    on_proc_exit(release_all_at_exit, 0);
    exit_callback_registered = true;
}

int claim_outgoing_slot(const OutgoingIdentity& id) {
    // Without the exit callback a slot could outlive its process.
    if (shared == nullptr || !exit_callback_registered || owned_count >= kMaxOwned) return -1;
    OutgoingRow row{};
    row.pid = MyProcPid;
    copy_cut(row.remote_addr, id.remote_addr);
    row.remote_port = id.remote_port;
    copy_cut(row.transport, id.transport);
    copy_cut(row.device, id.device);
    copy_cut(row.requested, id.requested);
    copy_cut(row.reason, id.reason);
    row.role = id.role;
    row.connected_at = GetCurrentTimestamp();
    for (int i = 0; i < shared->count; ++i) {
        std::uint32_t expected = kSlotFree;
        if (!pg_atomic_compare_exchange_u32(&shared->slots()[i].in_use, &expected, kSlotClaimed)) continue;
        write_slot(shared->slots()[i], row);
        owned[owned_count++] = i;
        return i;
    }
    return -1;
}

void release_outgoing_slot(int index) {
    for (int i = 0; i < owned_count; ++i) {
        if (owned[i] != index) continue;
        free_slot(index);
        owned[i] = owned[--owned_count];
        return;
    }
}

int outgoing_slot_count() { return shared != nullptr ? shared->count : 0; }

bool read_outgoing_slot(int index, OutgoingRow& out) {
    if (shared == nullptr || index < 0 || index >= shared->count) return false;
    Slot& slot = shared->slots()[index];
    if (pg_atomic_read_u32(&slot.in_use) == kSlotFree) return false;
    volatile Slot* s = &slot;
    for (;;) {
        const int before = s->changecount;
        pg_read_barrier();
        std::memcpy(&out, &slot.row, sizeof out);
        pg_read_barrier();
        const int after = s->changecount;
        if (before == after && (before & 1) == 0) break;
        CHECK_FOR_INTERRUPTS();
    }
    return out.pid != 0;
}

}  // namespace pg_rdma::server
