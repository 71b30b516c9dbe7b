// pg_stat_rdma_outgoing's rows: a SharedSlot each (shared_slot.hpp,
// lock-free reads and writes), kOutgoingSlotsPerBackend per MaxBackends; a
// process keeps the list of those it owns, to free them at exit.
#include "server_ext/outgoing_slots.hpp"

#include <algorithm>
#include <cstring>

#include "server_ext/shared_slot.hpp"
#include "server_ext/pg_headers.hpp"

namespace pg_rdma::server {
namespace {

constexpr const char* kShmemName = "pg_rdma pg_stat_rdma_outgoing slots";
// This process's claimed slots, released at exit without a scan; more
// connections at once than this get no row.
constexpr int kMaxOwned = 64;

// Its row's pid is 0 while claimed but not yet filled.
using Slot = SharedSlot<OutgoingRow>;
using SlotArray = SharedSlotArray<OutgoingRow>;
static_assert(alignof(Slot) <= alignof(SlotArray), "slots follow the header unpadded");

SlotArray* shared = nullptr;
int owned[kMaxOwned];
int owned_count = 0;
bool exit_callback_registered = false;
shmem_request_hook_type prev_shmem_request_hook = nullptr;
shmem_startup_hook_type prev_shmem_startup_hook = nullptr;

int slot_count() { return MaxBackends * kOutgoingSlotsPerBackend; }

void request_shmem() {
    if (prev_shmem_request_hook != nullptr) prev_shmem_request_hook();
    RequestAddinShmemSpace(SlotArray::size(slot_count()));
}

void startup_shmem() {
    if (prev_shmem_startup_hook != nullptr) prev_shmem_startup_hook();
    shared = SlotArray::attach(kShmemName, slot_count());
}

template <std::size_t N>
void copy_cut(char (&field)[N], std::string_view text) {
    const auto n = std::min(text.size(), sizeof field - 1);
    std::memcpy(field, text.data(), n);
    field[n] = '\0';
}

void free_slot(int index) {
    shared->slots()[index].release([](OutgoingRow& r) { r = OutgoingRow{}; });
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
        if (!shared->slots()[i].claim()) continue;
        shared->slots()[i].write([&](OutgoingRow& r) { r = row; });
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
    return shared->slots()[index].read(out) && out.pid != 0;
}

}  // namespace pg_rdma::server
