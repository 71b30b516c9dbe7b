// Consistency without locks, as PgBackendStatus does it (st_changecount in
// utils/backend_status.h): only the owning backend writes its slot; it
// increments `changecount` before and after each change, with write
// barriers, so the count is odd while a change is under way. A reader copies
// the row between two reads of the count and retries unless both are equal
// and even. The owner never waits (its counters change on the hot path,
// every send and receive), readers are rare and retry at most while one
// small memcpy is in progress. Claiming a free slot is a compare-and-swap on
// `in_use`: the array is not indexed by BackendId, so that it can serve
// any process that claims a row.
#include "server_ext/stat_slots.hpp"

#include <algorithm>

#include "server_ext/pg_headers.hpp"

namespace pg_rdma::server {
namespace {

constexpr std::uint32_t kSlotFree = 0;
constexpr std::uint32_t kSlotClaimed = 1;
constexpr const char* kShmemName = "pg_rdma pg_stat_rdma slots";

struct Slot {
    pg_atomic_uint32 in_use;  // kSlotFree / kSlotClaimed
    int changecount;          // odd while the owner writes
    StatRow row;              // pid 0 while claimed but not yet filled
};

// The shared block: this header, then `count` slots.
struct alignas(alignof(std::max_align_t)) SlotArray {
    int count;
    Slot* slots() { return reinterpret_cast<Slot*>(this + 1); }
};
static_assert(alignof(Slot) <= alignof(SlotArray), "slots follow the header unpadded");

SlotArray* shared_slots = nullptr;
Slot* my_slot = nullptr;
bool exit_callback_registered = false;
shmem_request_hook_type prev_shmem_request_hook = nullptr;
shmem_startup_hook_type prev_shmem_startup_hook = nullptr;

Size slot_array_size(int count) {
    return add_size(sizeof(SlotArray), mul_size(static_cast<Size>(count), sizeof(Slot)));
}

void request_shmem() {
    if (prev_shmem_request_hook != nullptr) prev_shmem_request_hook();
    RequestAddinShmemSpace(slot_array_size(MaxBackends));
}

void startup_shmem() {
    if (prev_shmem_startup_hook != nullptr) prev_shmem_startup_hook();
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    bool found = false;
    shared_slots = static_cast<SlotArray*>(ShmemInitStruct(kShmemName, slot_array_size(MaxBackends), &found));
    if (!found) {
        shared_slots->count = MaxBackends;
        for (int i = 0; i < MaxBackends; ++i) {
            Slot& s = shared_slots->slots()[i];
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

// The owner's write protocol: count odd, change, count even.
template <typename F>
void write_my_slot(F&& change) {
    if (my_slot == nullptr) return;
    volatile Slot* s = my_slot;
    s->changecount = s->changecount + 1;
    pg_write_barrier();
    change(my_slot->row);
    pg_write_barrier();
    s->changecount = s->changecount + 1;
}

void set_identity(StatRow& r, const SessionIdentity& id) {
    copy_cut(r.client_addr, id.client_addr);
    r.client_port = id.client_port;
    r.transport = id.transport;
    copy_cut(r.device, id.device);
    r.protocol_version = id.protocol_version;
    r.rx_buffer_size = id.rx_buffer_size;
    r.failed_over = id.failed_over;
    r.requested = id.requested;
    copy_cut(r.reason, id.reason);
    r.role = id.role;
}

void release_at_exit(int, Datum) { release_stat_slot(); }

}  // namespace

void install_stat_slot_hooks() {
    prev_shmem_request_hook = shmem_request_hook;
    shmem_request_hook = request_shmem;
    prev_shmem_startup_hook = shmem_startup_hook;
    shmem_startup_hook = startup_shmem;
}

bool claim_stat_slot(const SessionIdentity& identity) {
    if (my_slot != nullptr) {
        update_stat_identity(identity);
        return true;
    }
    if (shared_slots == nullptr) return false;
    for (int i = 0; i < shared_slots->count && my_slot == nullptr; ++i) {
        std::uint32_t expected = kSlotFree;
        if (pg_atomic_compare_exchange_u32(&shared_slots->slots()[i].in_use, &expected, kSlotClaimed))
            my_slot = &shared_slots->slots()[i];
    }
    if (my_slot == nullptr) return false;
    if (!exit_callback_registered) {
        // on_proc_exit works wherever the claim is made (an on_shmem_exit
        // callback before InitProcess is a FATAL, "called prematurely");
        // the main shared memory stays mapped through these callbacks.
        on_proc_exit(release_at_exit, 0);
        exit_callback_registered = true;
    }
    write_my_slot([&](StatRow& r) {
        std::memset(&r, 0, sizeof r);
        set_identity(r, identity);
        r.backend_start = MyStartTimestamp;
        r.pid = MyProcPid;
    });
    return true;
}

void update_stat_identity(const SessionIdentity& identity) {
    write_my_slot([&](StatRow& r) { set_identity(r, identity); });
}

void update_stat_counters(std::uint64_t bytes_sent, std::uint64_t bytes_received) {
    write_my_slot([&](StatRow& r) {
        r.bytes_sent = bytes_sent;
        r.bytes_received = bytes_received;
    });
}

void release_stat_slot() {
    if (my_slot == nullptr) return;
    write_my_slot([](StatRow& r) { r.pid = 0; });
    pg_write_barrier();
    pg_atomic_write_u32(&my_slot->in_use, kSlotFree);
    my_slot = nullptr;
}

int stat_slot_count() { return shared_slots != nullptr ? shared_slots->count : 0; }

bool read_stat_slot(int index, StatRow& out) {
    Slot& slot = shared_slots->slots()[index];
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
