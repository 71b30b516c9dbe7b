#include "transport/pinned_buffer.hpp"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include <fmt/format.h>

namespace pg_rdma::transport {
namespace {

std::atomic<std::size_t> g_pinned_bytes{0};

std::size_t round_to_pages(std::size_t bytes) {
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    return (bytes + page - 1) / page * page;
}

}  // namespace

std::size_t pinned_bytes_in_process() { return g_pinned_bytes.load(); }

bool check_memlock(std::size_t bytes, Error& err) {
    rlimit lim{};
    if (getrlimit(RLIMIT_MEMLOCK, &lim) != 0) return fail_errno(err, errno, "getrlimit(RLIMIT_MEMLOCK)");
    if (lim.rlim_cur == RLIM_INFINITY) return true;
    const std::size_t need = pinned_bytes_in_process() + bytes + kVerbsOverheadBytes;
    if (need <= lim.rlim_cur) return true;
    return fail(err, ENOMEM,
                fmt::format("RLIMIT_MEMLOCK is {} KiB but this RDMA connection needs {} KiB of pinned "
                            "memory: raise the limit (ulimit -l unlimited, or LimitMEMLOCK=infinity "
                            "in the systemd unit, or memlock in /etc/security/limits.conf)",
                            lim.rlim_cur / 1024, need / 1024));
}

PinnedBuffer::~PinnedBuffer() { release(); }

PinnedBuffer::PinnedBuffer(PinnedBuffer&& o) noexcept
    : data_(o.data_), size_(o.size_), mr_(std::move(o.mr_)) {
    o.data_ = nullptr;
    o.size_ = 0;
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
    if (this != &o) {
        release();
        data_ = o.data_;
        size_ = o.size_;
        mr_ = std::move(o.mr_);
        o.data_ = nullptr;
        o.size_ = 0;
    }
    return *this;
}

void PinnedBuffer::release() {
    if (mr_) g_pinned_bytes -= size_;
    mr_.reset();  // deregister before the pages go away
    if (data_ != nullptr) munmap(data_, size_);
    data_ = nullptr;
    size_ = 0;
}

bool PinnedBuffer::create(ibv_pd* pd, std::size_t bytes, int access, const char* what,
                          PinnedBuffer& out, Error& err) {
    const std::size_t size = round_to_pages(bytes);
    void* mem = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return fail_errno(err, errno, fmt::format("mmap({} bytes for {})", size, what));
    PinnedBuffer buf;
    buf.data_ = static_cast<std::uint8_t*>(mem);
    buf.size_ = size;
    // What verbs.h's ibv_reg_mr() macro calls when the access flags need
    // nothing older; named directly so that every build, optimized or not,
    // calls this one function (libpq_rdma.so forwards it by name:
    // libclient/preload/rdma_libraries.hpp). The iova is the address, as
    // ibv_reg_mr's.
    buf.mr_.reset(ibv_reg_mr_iova2(pd, mem, size, reinterpret_cast<std::uintptr_t>(mem),
                                   static_cast<unsigned int>(access)));
    if (!buf.mr_) {
        const int e = errno != 0 ? errno : ENOMEM;
        return fail_errno(err, e, fmt::format("ibv_reg_mr_iova2({} KiB for {})", size / 1024, what));
    }
    g_pinned_bytes += size;
    out = std::move(buf);
    return true;
}

}  // namespace pg_rdma::transport
