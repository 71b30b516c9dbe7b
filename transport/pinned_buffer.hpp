// Page-aligned memory registered with the HCA, counted against the
// process's RLIMIT_MEMLOCK budget.
//
// Page alignment keeps registered pages apart from ordinary heap pages, so
// a fork() in the owning process (psql's \! does one) never shares a pinned
// page with memory the child writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "transport/error.hpp"
#include "transport/verbs_raii.hpp"

namespace pg_rdma::transport {

// Queue pairs and CQs pin a little memory of their own (rings shared with
// the kernel); check_memlock keeps this much headroom beyond our buffers.
inline constexpr std::size_t kVerbsOverheadBytes = 64 * 1024;

// Fails with ENOMEM and a message naming `ulimit -l` and LimitMEMLOCK when
// pinning `bytes` more (plus kVerbsOverheadBytes) would exceed RLIMIT_MEMLOCK.
bool check_memlock(std::size_t bytes, Error& err);

// Bytes this process has pinned through PinnedBuffer right now.
std::size_t pinned_bytes_in_process();

class PinnedBuffer {
public:
    PinnedBuffer() = default;
    ~PinnedBuffer();
    PinnedBuffer(PinnedBuffer&& o) noexcept;
    PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;

    // Maps `bytes` (rounded up to pages) and registers them with `access`.
    static bool create(ibv_pd* pd, std::size_t bytes, int access, const char* what,
                       PinnedBuffer& out, Error& err);

    [[nodiscard]] std::uint8_t* data() const { return data_; }
    [[nodiscard]] std::size_t size() const { return size_; }
    [[nodiscard]] std::uint32_t lkey() const { return mr_->lkey; }
    [[nodiscard]] std::uint32_t rkey() const { return mr_->rkey; }

private:
    void release();
    // Declared before mr_ so the registration is dropped before the unmap.
    std::uint8_t* data_ = nullptr;
    std::size_t size_ = 0;
    MrPtr mr_;
};

}  // namespace pg_rdma::transport
