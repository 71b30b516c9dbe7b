// Reads the running executable's dynamic section: where its symbol and
// string tables and its two relocation tables are, and which GOT slot each
// imported function is bound through. Read-only: nothing here writes memory.
//
// Only what the dynamic linker itself uses is trusted (PT_LOAD, PT_DYNAMIC,
// PT_GNU_RELRO and the DT_* entries); section headers are not needed, so a
// stripped executable is read as well as any other.
#pragma once

#include <link.h>

#include <cstddef>
#include <string>
#include <vector>

namespace pg_rdma::interpose {

// How an imported function is reached through the GOT.
enum class SlotKind {
    jump_slot,  // R_*_JUMP_SLOT: the slot a PLT call jumps through
    glob_dat,   // R_*_GLOB_DAT: the slot code loads when it takes the function's address
                // (GNU ld also routes calls through it, via .plt.got, when both happen)
};

const char* slot_kind_name(SlotKind kind) noexcept;

// One GOT slot of the executable bound to an imported function.
struct ImportSlot {
    const char* symbol;  // name without version, in the executable's .dynstr
    void** slot;         // the GOT entry (in the mapped image)
    SlotKind kind;
};

// The running executable, as the dynamic linker loaded it.
struct ElfImage {
    ElfW(Addr) base = 0;  // load bias (0 for a non-PIE executable)
    const ElfW(Phdr)* phdr = nullptr;
    std::size_t phnum = 0;
    const ElfW(Sym)* symtab = nullptr;
    const char* strtab = nullptr;
    std::size_t strsz = 0;
    const ElfW(Rela)* jmprel = nullptr;  // DT_JMPREL: the PLT's relocations
    std::size_t jmprel_count = 0;
    const ElfW(Rela)* rela = nullptr;  // DT_RELA: the others (GLOB_DAT among them)
    std::size_t rela_count = 0;
};

// True where this code knows the relocation types (x86_64). Elsewhere every
// function below reports "unsupported" instead of guessing.
bool architecture_supported() noexcept;

// Finds the executable (the first object dl_iterate_phdr(3) reports is the
// main program) and its tables. False with a sentence in `error` when it has
// no dynamic section, uses REL instead of RELA, or the architecture is not
// supported. `error` is only assigned on failure (it may throw bad_alloc).
bool find_executable_image(ElfImage& image, std::string& error);

// The same for a loaded shared library, found by the end of its path
// ("/libpq.so.5"): false with a sentence when it is not loaded or unusable.
bool find_library_image(const char* path_suffix, ElfImage& image, std::string& error);

// Every loaded shared library with a usable dynamic section (the executable
// and the vDSO excluded), in load order.
std::vector<ElfImage> loaded_library_images();

// Changes whenever a library is loaded or unloaded (glibc's dlpi_adds and
// dlpi_subs), so a caller can skip a scan when nothing changed; 0 when the
// loader does not report it.
unsigned long long loaded_objects_generation() noexcept;

// The address range [low, high) the image's PT_LOAD segments occupy, and
// whether an address falls inside it.
void mapped_range(const ElfImage& image, ElfW(Addr)& low, ElfW(Addr)& high) noexcept;
bool image_contains(const ElfImage& image, const void* address) noexcept;

// Calls visit(const ImportSlot&) for each JUMP_SLOT relocation, then each
// GLOB_DAT relocation of a function symbol, in table order. A symbol may
// appear more than once (JUMP_SLOT and GLOB_DAT both, with gold or lld).
template <typename Visit>
void for_each_import_slot(const ElfImage& image, Visit&& visit);

// The ImportSlot for one relocation entry, or false when the entry is not an
// import slot of a named function (another type, symbol index 0, a data
// symbol for GLOB_DAT, a name outside the string table).
bool import_slot_of(const ElfImage& image, const ElfW(Rela)& rel, ImportSlot& out) noexcept;

template <typename Visit>
void for_each_import_slot(const ElfImage& image, Visit&& visit) {
    ImportSlot slot{};
    for (std::size_t i = 0; i < image.jmprel_count; ++i)
        if (import_slot_of(image, image.jmprel[i], slot)) visit(slot);
    for (std::size_t i = 0; i < image.rela_count; ++i)
        if (import_slot_of(image, image.rela[i], slot)) visit(slot);
}

}  // namespace pg_rdma::interpose
