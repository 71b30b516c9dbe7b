// pg_stat_rdma's rows: a SharedSlot each (shared_slot.hpp, lock-free
// reads and writes), one per MaxBackends; a backend owns at most one.
#include "server_ext/stat_slots.hpp"

#include <algorithm>

#include "server_ext/shared_slot.hpp"
#include "server_ext/pg_headers.hpp"

namespace pg_rdma::server {
namespace {

constexpr const char* kShmemName = "pg_rdma pg_stat_rdma slots";

// Its row's pid is 0 while claimed but not yet filled.
using Slot = SharedSlot<StatRow>;
using SlotArray = SharedSlotArray<StatRow>;
static_assert(alignof(Slot) <= alignof(SlotArray), "slots follow the header unpadded");

SlotArray* shared_slots = nullptr;
Slot* my_slot = nullptr;
bool exit_callback_registered = false;
shmem_request_hook_type prev_shmem_request_hook = nullptr;
shmem_startup_hook_type prev_shmem_startup_hook = nullptr;

void request_shmem() {
    if (prev_shmem_request_hook != nullptr) prev_shmem_request_hook();
    RequestAddinShmemSpace(SlotArray::size(MaxBackends));
}

void startup_shmem() {
    if (prev_shmem_startup_hook != nullptr) prev_shmem_startup_hook();
    shared_slots = SlotArray::attach(kShmemName, MaxBackends);
}

template <std::size_t N>
void copy_cut(char (&field)[N], std::string_view text) {
    const auto n = std::min(text.size(), sizeof field - 1);
    std::memcpy(field, text.data(), n);
    field[n] = '\0';
}

template <typename F>
void write_my_slot(F&& change) {
    if (my_slot != nullptr) my_slot->write(change);
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
    for (int i = 0; i < shared_slots->count && my_slot == nullptr; ++i)
        if (shared_slots->slots()[i].claim()) my_slot = &shared_slots->slots()[i];
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
    my_slot->release([](StatRow& r) { r.pid = 0; });
    my_slot = nullptr;
}

int stat_slot_count() { return shared_slots != nullptr ? shared_slots->count : 0; }

bool read_stat_slot(int index, StatRow& out) {
    return shared_slots->slots()[index].read(out) && out.pid != 0;
}

}  // namespace pg_rdma::server
