#include "server_ext/interpose/writable_window.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace pg_rdma::interpose {

namespace {

int prot_of(ElfW(Word) flags) {
    return ((flags & PF_R) ? PROT_READ : 0) | ((flags & PF_W) ? PROT_WRITE : 0) | ((flags & PF_X) ? PROT_EXEC : 0);
}

}  // namespace

int loader_protection(const ElfImage& image, std::uintptr_t page, std::size_t page_size) noexcept {
    int protection = -1;
    std::uintptr_t relro_start = 0, relro_end = 0;
    for (std::size_t i = 0; i < image.phnum; ++i) {
        const ElfW(Phdr)& ph = image.phdr[i];
        const std::uintptr_t start = image.base + ph.p_vaddr;
        if (ph.p_type == PT_LOAD && page + page_size > start && page < start + ph.p_memsz)
            protection = prot_of(ph.p_flags);
        if (ph.p_type == PT_GNU_RELRO) {
            relro_start = start & ~(page_size - 1);
            relro_end = (start + ph.p_memsz) & ~(page_size - 1);
        }
    }
    if (protection >= 0 && page >= relro_start && page + page_size <= relro_end) protection = PROT_READ;
    return protection;
}

WritableWindow::WritableWindow(const ElfImage& image) noexcept
    : image_(image), page_size_(static_cast<std::size_t>(sysconf(_SC_PAGESIZE))) {}

bool WritableWindow::add(void* const* slot) noexcept {
    const auto first = reinterpret_cast<std::uintptr_t>(slot);
    const std::uintptr_t last = first + sizeof(void*) - 1;
    return add_page(first & ~(page_size_ - 1)) && add_page(last & ~(page_size_ - 1));
}

bool WritableWindow::add_page(std::uintptr_t start) noexcept {
    for (std::size_t i = 0; i < count_; ++i)
        if (pages_[i].start == start) return true;
    if (count_ == kMaxPages) return false;
    pages_[count_++] = Page{start, loader_protection(image_, start, page_size_), false};
    return true;
}

void WritableWindow::set_error(const char* what, std::uintptr_t page, int code) noexcept {
    std::snprintf(error_, sizeof error_, "%s on the GOT page at %#lx: %s", what, static_cast<unsigned long>(page),
                  code == 0 ? "no PT_LOAD segment of the executable covers it" : std::strerror(code));
}

bool WritableWindow::open() noexcept {
    for (std::size_t i = 0; i < count_; ++i) {
        Page& page = pages_[i];
        if (page.protection < 0) {
            close();
            set_error("making the page writable", page.start, 0);
            return false;
        }
        if (page.protection & PROT_WRITE) continue;
        if (mprotect(reinterpret_cast<void*>(page.start), page_size_, page.protection | PROT_WRITE) != 0) {
            const int code = errno;
            close();
            set_error("mprotect(PROT_WRITE)", page.start, code);
            return false;
        }
        page.opened = true;
    }
    return true;
}

bool WritableWindow::close() noexcept {
    const Page* failed = nullptr;
    int code = 0;
    for (std::size_t i = 0; i < count_; ++i) {
        Page& page = pages_[i];
        if (!page.opened) continue;
        if (mprotect(reinterpret_cast<void*>(page.start), page_size_, page.protection) != 0) {
            if (failed == nullptr) {
                failed = &page;
                code = errno;
            }
            continue;
        }
        page.opened = false;
    }
    if (failed != nullptr) set_error("mprotect(back to the loader's protection)", failed->start, code);
    return failed == nullptr;
}

}  // namespace pg_rdma::interpose
