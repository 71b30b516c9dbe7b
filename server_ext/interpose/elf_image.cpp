#include "server_ext/interpose/elf_image.hpp"

#include <elf.h>

#include <cstdint>
#include <cstddef>
#include <cstring>

namespace pg_rdma::interpose {

namespace {

#if defined(__x86_64__)
constexpr bool kSupported = true;
constexpr std::uint32_t kJumpSlot = R_X86_64_JUMP_SLOT;
constexpr std::uint32_t kGlobDat = R_X86_64_GLOB_DAT;
#else
// Another architecture has other relocation numbers (and some use REL, not
// RELA); rather than guess, everything reports "unsupported" there.
constexpr bool kSupported = false;
constexpr std::uint32_t kJumpSlot = 0xffffffff;
constexpr std::uint32_t kGlobDat = 0xffffffff;
#endif

// The r_info and st_info fields, read with the macros of the native class.
#if __ELF_NATIVE_CLASS == 64
std::uint32_t rel_type(ElfW(Xword) info) { return static_cast<std::uint32_t>(ELF64_R_TYPE(info)); }
std::size_t rel_symbol(ElfW(Xword) info) { return ELF64_R_SYM(info); }
unsigned symbol_type(unsigned char info) { return ELF64_ST_TYPE(info); }
#else
std::uint32_t rel_type(ElfW(Word) info) { return ELF32_R_TYPE(info); }
std::size_t rel_symbol(ElfW(Word) info) { return ELF32_R_SYM(info); }
unsigned symbol_type(unsigned char info) { return ELF32_ST_TYPE(info); }
#endif

struct FirstObject {
    ElfW(Addr) base = 0;
    const ElfW(Phdr)* phdr = nullptr;
    std::size_t phnum = 0;
};

int take_first(dl_phdr_info* info, std::size_t, void* data) {
    auto* first = static_cast<FirstObject*>(data);
    first->base = info->dlpi_addr;
    first->phdr = info->dlpi_phdr;
    first->phnum = info->dlpi_phnum;
    return 1;  // the main program comes first: stop
}

struct NamedObject {
    const char* suffix;
    FirstObject found;
};

int take_named(dl_phdr_info* info, std::size_t, void* data) {
    auto* wanted = static_cast<NamedObject*>(data);
    const char* name = info->dlpi_name;
    if (name == nullptr) return 0;
    const std::size_t n = std::strlen(name), k = std::strlen(wanted->suffix);
    if (n < k || std::strcmp(name + n - k, wanted->suffix) != 0) return 0;
    wanted->found.base = info->dlpi_addr;
    wanted->found.phdr = info->dlpi_phdr;
    wanted->found.phnum = info->dlpi_phnum;
    return 1;
}

bool read_dynamic(const FirstObject& object, const char* what, ElfImage& image, std::string& error);

}  // namespace

void mapped_range(const ElfImage& image, ElfW(Addr)& low, ElfW(Addr)& high) noexcept {
    low = ~ElfW(Addr){0};
    high = 0;
    for (std::size_t i = 0; i < image.phnum; ++i) {
        const ElfW(Phdr)& ph = image.phdr[i];
        if (ph.p_type != PT_LOAD) continue;
        if (image.base + ph.p_vaddr < low) low = image.base + ph.p_vaddr;
        if (image.base + ph.p_vaddr + ph.p_memsz > high) high = image.base + ph.p_vaddr + ph.p_memsz;
    }
}

bool image_contains(const ElfImage& image, const void* address) noexcept {
    ElfW(Addr) low = 0, high = 0;
    mapped_range(image, low, high);
    const auto a = reinterpret_cast<ElfW(Addr)>(address);
    return a >= low && a < high;
}

namespace {

// A DT_* pointer as an address. glibc adds the load bias to these entries
// in place when .dynamic is writable (x86_64), other loaders (musl) do not.
// A value already inside the image is taken as is, anything else as an
// offset from the bias: the two readings cannot both land inside the image
// because the bias of a loaded PIE is larger than the image.
ElfW(Addr) dynamic_address(ElfW(Addr) value, const ElfImage& image, ElfW(Addr) low, ElfW(Addr) high) {
    if (value >= low && value < high) return value;
    return value + image.base;
}

}  // namespace

const char* slot_kind_name(SlotKind kind) noexcept {
    return kind == SlotKind::jump_slot ? "JUMP_SLOT" : "GLOB_DAT";
}

bool architecture_supported() noexcept { return kSupported; }

bool find_executable_image(ElfImage& image, std::string& error) {
    if (!kSupported) {
        error = "GOT patching is implemented for x86_64 only (relocation types of this architecture are unknown)";
        return false;
    }
    FirstObject first;
    dl_iterate_phdr(take_first, &first);
    if (first.phdr == nullptr) {
        error = "dl_iterate_phdr reported no objects";
        return false;
    }
    return read_dynamic(first, "the executable", image, error);
}

bool find_library_image(const char* path_suffix, ElfImage& image, std::string& error) {
    if (!kSupported) {
        error = "GOT patching is implemented for x86_64 only (relocation types of this architecture are unknown)";
        return false;
    }
    NamedObject named{path_suffix, {}};
    dl_iterate_phdr(take_named, &named);
    if (named.found.phdr == nullptr) {
        error = std::string("no loaded object's path ends with ") + path_suffix;
        return false;
    }
    return read_dynamic(named.found, path_suffix, image, error);
}

namespace {

int collect_libraries(dl_phdr_info* info, std::size_t, void* data) {
    auto* all = static_cast<std::vector<FirstObject>*>(data);
    const char* name = info->dlpi_name;
    // The executable has no name here; the vDSO is not a library anyone patches.
    if (name != nullptr && name[0] != '\0' && std::strncmp(name, "linux-vdso", 10) != 0 &&
        std::strncmp(name, "linux-gate", 10) != 0)
        all->push_back(FirstObject{info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum});
    return 0;
}

int read_generation(dl_phdr_info* info, std::size_t size, void* data) {
    auto* generation = static_cast<unsigned long long*>(data);
    if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
        *generation = info->dlpi_adds + info->dlpi_subs;
    return 1;
}

}  // namespace

unsigned long long loaded_objects_generation() noexcept {
    unsigned long long generation = 0;
    dl_iterate_phdr(read_generation, &generation);
    return generation;
}

std::vector<ElfImage> loaded_library_images() {
    std::vector<ElfImage> images;
    if (!kSupported) return images;
    std::vector<FirstObject> all;
    dl_iterate_phdr(collect_libraries, &all);
    std::string ignored;
    for (const FirstObject& object : all) {
        ElfImage image;
        if (read_dynamic(object, "a library", image, ignored)) images.push_back(image);
    }
    return images;
}

namespace {

bool read_dynamic(const FirstObject& object, const char* what, ElfImage& image, std::string& error) {
    image = ElfImage{};
    image.base = object.base;
    image.phdr = object.phdr;
    image.phnum = object.phnum;

    const ElfW(Dyn)* dynamic = nullptr;
    for (std::size_t i = 0; i < image.phnum; ++i)
        if (image.phdr[i].p_type == PT_DYNAMIC)
            dynamic = reinterpret_cast<const ElfW(Dyn)*>(image.base + image.phdr[i].p_vaddr);
    if (dynamic == nullptr) {
        error = std::string(what) + " has no dynamic section (statically linked)";
        return false;
    }

    ElfW(Addr) low = 0, high = 0;
    mapped_range(image, low, high);
    ElfW(Addr) symtab = 0, strtab = 0, jmprel = 0, rela = 0;
    std::size_t pltrelsz = 0, relasz = 0;
    ElfW(Sxword) pltrel = DT_RELA;
    std::size_t relaent = sizeof(ElfW(Rela)), syment = sizeof(ElfW(Sym));
    for (const ElfW(Dyn)* d = dynamic; d->d_tag != DT_NULL; ++d) {
        switch (d->d_tag) {
        case DT_SYMTAB: symtab = dynamic_address(d->d_un.d_ptr, image, low, high); break;
        case DT_STRTAB: strtab = dynamic_address(d->d_un.d_ptr, image, low, high); break;
        case DT_STRSZ: image.strsz = d->d_un.d_val; break;
        case DT_SYMENT: syment = d->d_un.d_val; break;
        case DT_JMPREL: jmprel = dynamic_address(d->d_un.d_ptr, image, low, high); break;
        case DT_PLTRELSZ: pltrelsz = d->d_un.d_val; break;
        case DT_PLTREL: pltrel = static_cast<ElfW(Sxword)>(d->d_un.d_val); break;
        case DT_RELA: rela = dynamic_address(d->d_un.d_ptr, image, low, high); break;
        case DT_RELASZ: relasz = d->d_un.d_val; break;
        case DT_RELAENT: relaent = d->d_un.d_val; break;
        case DT_REL:
            error = std::string(what) + " has REL relocations; only RELA is supported";
            return false;
        default: break;
        }
    }
    if (pltrel != DT_RELA || relaent != sizeof(ElfW(Rela)) || syment != sizeof(ElfW(Sym))) {
        error = std::string(what) + ": relocation or symbol entries are not RELA/ElfW(Sym) sized";
        return false;
    }
    if (symtab == 0 || strtab == 0) {
        error = std::string(what) + ": the dynamic section has no DT_SYMTAB or DT_STRTAB";
        return false;
    }
    image.symtab = reinterpret_cast<const ElfW(Sym)*>(symtab);
    image.strtab = reinterpret_cast<const char*>(strtab);
    image.jmprel = reinterpret_cast<const ElfW(Rela)*>(jmprel);
    image.jmprel_count = jmprel == 0 ? 0 : pltrelsz / sizeof(ElfW(Rela));
    image.rela = reinterpret_cast<const ElfW(Rela)*>(rela);
    image.rela_count = rela == 0 ? 0 : relasz / sizeof(ElfW(Rela));
    // Some linkers let DT_RELASZ cover .rela.plt too, at its end (glibc
    // allows it): count those entries once, as PLT relocations.
    if (image.rela_count != 0 && image.jmprel_count != 0 && image.jmprel >= image.rela &&
        image.jmprel + image.jmprel_count == image.rela + image.rela_count)
        image.rela_count -= image.jmprel_count;
    return true;
}

}  // namespace

bool import_slot_of(const ElfImage& image, const ElfW(Rela)& rel, ImportSlot& out) noexcept {
    const std::uint32_t type = rel_type(rel.r_info);
    const std::size_t index = rel_symbol(rel.r_info);
    if ((type != kJumpSlot && type != kGlobDat) || index == 0) return false;
    const ElfW(Sym)& sym = image.symtab[index];
    // GLOB_DAT also binds data (stderr, environ): only functions are ours.
    if (type == kGlobDat && symbol_type(sym.st_info) != STT_FUNC) return false;
    if (sym.st_name == 0 || sym.st_name >= image.strsz) return false;
    out.symbol = image.strtab + sym.st_name;
    out.slot = reinterpret_cast<void**>(image.base + rel.r_offset);
    out.kind = type == kJumpSlot ? SlotKind::jump_slot : SlotKind::glob_dat;
    return true;
}

}  // namespace pg_rdma::interpose
