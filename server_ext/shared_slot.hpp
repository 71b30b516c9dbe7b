// A row in shared memory that one process owns and any backend may read,
// without locks, as PostgreSQL keeps PgBackendStatus (st_changecount in
// utils/backend_status.h). A slot is claimed by a compare-and-swap on
// `in_use` (the arrays are not indexed by BackendId, so any process can
// hold one); only its owner writes it, incrementing `changecount` before
// and after each change with write barriers, so the count is odd while a
// change is under way; a reader copies the row between two reads of the
// count and retries unless both are equal and even. The owner never waits
// (pg_stat_rdma's counters change on every send and receive), readers are
// rare and retry at most while one small memcpy is in progress, and a
// process that dies mid-write leaves no lock held.
//
// Used by pg_stat_rdma's rows (stat_slots.cpp) and
// pg_stat_rdma_outgoing's (outgoing_slots.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "server_ext/pg_headers.hpp"

namespace pg_rdma::server {

template <typename Row>
struct SharedSlot {
    pg_atomic_uint32 in_use;  // kFree / kClaimed
    int changecount;          // odd while the owner writes
    Row row;

    static constexpr std::uint32_t kFree = 0;
    static constexpr std::uint32_t kClaimed = 1;

    // In the postmaster, when the array is created.
    void init() {
        pg_atomic_init_u32(&in_use, kFree);
        changecount = 0;
        std::memset(&row, 0, sizeof row);
    }

    // true when this process took the slot.
    bool claim() {
        std::uint32_t expected = kFree;
        return pg_atomic_compare_exchange_u32(&in_use, &expected, kClaimed);
    }

    // The owner's change: count odd, change(row), count even.
    template <typename F>
    void write(F&& change) {
        volatile SharedSlot* s = this;
        s->changecount = s->changecount + 1;
        pg_write_barrier();
        change(row);
        pg_write_barrier();
        s->changecount = s->changecount + 1;
    }

    // The owner gives the slot back, after clearing what readers could see.
    template <typename F>
    void release(F&& clear) {
        write(clear);
        pg_write_barrier();
        pg_atomic_write_u32(&in_use, kFree);
    }

    // A consistent copy; false when the slot is free. May raise a
    // PostgreSQL error (CHECK_FOR_INTERRUPTS while it retries): call it
    // from C-style code.
    bool read(Row& out) {
        if (pg_atomic_read_u32(&in_use) == kFree) return false;
        volatile SharedSlot* s = this;
        for (;;) {
            const int before = s->changecount;
            pg_read_barrier();
            std::memcpy(&out, &row, sizeof out);
            pg_read_barrier();
            const int after = s->changecount;
            if (before == after && (before & 1) == 0) return true;
            CHECK_FOR_INTERRUPTS();
        }
    }
};

// The shared block: this header, then `count` slots.
template <typename Row>
struct alignas(alignof(std::max_align_t)) SharedSlotArray {
    int count;
    SharedSlot<Row>* slots() { return reinterpret_cast<SharedSlot<Row>*>(this + 1); }

    static Size size(int count) {
        return add_size(sizeof(SharedSlotArray), mul_size(static_cast<Size>(count), sizeof(SharedSlot<Row>)));
    }
    // The array named `name` in shared memory, made with `count` free slots
    // by the first process (the postmaster) to ask: from shmem_startup_hook.
    static SharedSlotArray* attach(const char* name, int count) {
        LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
        bool found = false;
        auto* array = static_cast<SharedSlotArray*>(ShmemInitStruct(name, size(count), &found));
        if (!found) {
            array->count = count;
            for (int i = 0; i < count; ++i) array->slots()[i].init();
        }
        LWLockRelease(AddinShmemInitLock);
        return array;
    }
};

}  // namespace pg_rdma::server
