// Makes the executable's pages that hold some GOT slots writable for a
// moment, then gives each page back the protection the dynamic linker left
// on it: PROT_READ inside PT_GNU_RELRO (full RELRO puts the whole GOT
// there), the PT_LOAD segment's own flags elsewhere (a lazily bound
// .got.plt stays writable, or lazy binding would fault).
//
// Fixed capacity, no allocation, no exception: once slots are being written
// nothing may fail half-way for lack of memory. Not thread-safe, like the
// patching that uses it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "server_ext/interpose/elf_image.hpp"

namespace pg_rdma::interpose {

// The protection (PROT_* bits) the dynamic linker left on the page starting
// at `page`, or -1 when no PT_LOAD segment covers it. ld.so protects
// PT_GNU_RELRO from its start rounded down to a page to its end rounded
// down: a page only partly inside keeps the segment's flags.
int loader_protection(const ElfImage& image, std::uintptr_t page, std::size_t page_size) noexcept;

class WritableWindow {
public:
    static constexpr std::size_t kMaxPages = 64;

    explicit WritableWindow(const ElfImage& image) noexcept;
    WritableWindow(const WritableWindow&) = delete;
    WritableWindow& operator=(const WritableWindow&) = delete;

    // Adds the page(s) spanning one slot; false when kMaxPages are taken.
    bool add(void* const* slot) noexcept;

    // Adds PROT_WRITE to every added page the loader left without it. On
    // failure, pages already opened are closed again and error() names the
    // page and the reason.
    bool open() noexcept;

    // Puts back the loader's protection on every page open() changed. On
    // failure the remaining pages are still tried; error() names the first.
    bool close() noexcept;

    // The last failure, one sentence ("" if none).
    const char* error() const noexcept { return error_; }

private:
    struct Page {
        std::uintptr_t start;
        int protection;  // the loader's
        bool opened;
    };

    bool add_page(std::uintptr_t start) noexcept;
    void set_error(const char* what, std::uintptr_t page, int code) noexcept;

    const ElfImage& image_;
    std::size_t page_size_;
    Page pages_[kMaxPages];
    std::size_t count_ = 0;
    char error_[192] = "";
};

}  // namespace pg_rdma::interpose
