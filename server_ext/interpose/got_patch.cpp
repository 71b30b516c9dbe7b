#include "server_ext/interpose/got_patch.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <new>
#include <utility>

#include "server_ext/interpose/writable_window.hpp"

namespace pg_rdma::interpose {

namespace {

// How many slots may be patched at once; the extension needs about a dozen
// symbols, each with one slot or two.
constexpr std::size_t kMaxSlots = 64;

// Every slot written since the last restore, with the function the dynamic
// linker had bound there. It is what *original reports on a second patch
// of the same symbol, and what restore puts back. Inherited by fork.
struct PatchedSlot {
    void** slot;
    void* real;
};
PatchedSlot g_patched[kMaxSlots];
std::size_t g_patched_count = 0;

const PatchedSlot* find_patched(void* const* slot) {
    for (std::size_t i = 0; i < g_patched_count; ++i)
        if (g_patched[i].slot == slot) return &g_patched[i];
    return nullptr;
}

void* load_slot(void* const* slot) { return __atomic_load_n(slot, __ATOMIC_ACQUIRE); }
void store_slot(void** slot, void* value) { __atomic_store_n(slot, value, __ATOMIC_RELEASE); }

// One slot about to be written.
struct PlannedSlot {
    void** slot;
    void* before;  // its content now (the real function, or an earlier replacement)
    void* real;
    std::size_t patch;  // index in the caller's list
    bool known;         // already in g_patched
};

// What the walk over the import slots found for one Patch.
struct SymbolState {
    void* real = nullptr;
    bool found = false;
    bool unbound = false;       // a slot still points into the executable (lazy binding)
    bool inconsistent = false;  // its slots hold different functions
};

PatchResult succeeded() noexcept { return PatchResult{true, {}}; }

PatchResult failed(std::string error) noexcept {
    PatchResult result;
    result.error = std::move(error);
    return result;
}

// For when building a message is what failed: `short_message` fits the
// small-string buffer, so assigning it does not allocate.
PatchResult failed_without_memory(const char* short_message) noexcept {
    PatchResult result;
    try {
        result.error = short_message;
    } catch (...) {
    }
    return result;
}

// "<title>: a, b" appended to `message` ("; "-separated) when any state
// matches `which`.
template <typename Which>
void list_symbols(std::string& message, const char* title, std::span<const Patch> patches,
                  const std::vector<SymbolState>& states, Which which) {
    bool first = true;
    for (std::size_t i = 0; i < patches.size(); ++i) {
        if (!which(states[i])) continue;
        if (first) {
            if (!message.empty()) message += "; ";
            message += title;
            message += ": ";
            first = false;
        } else {
            message += ", ";
        }
        message += patches[i].symbol;
    }
}

// The entries' own mistakes: a null or empty name, no replacement, a name
// listed twice. Empty when the list is well formed.
std::string check_list(std::span<const Patch> patches) {
    for (std::size_t i = 0; i < patches.size(); ++i) {
        const Patch& p = patches[i];
        if (p.symbol == nullptr || p.symbol[0] == '\0')
            return "patch entry " + std::to_string(i) + " names no symbol";
        if (p.replacement == nullptr) return std::string("patch entry for ") + p.symbol + " has no replacement";
        for (std::size_t j = 0; j < i; ++j)
            if (std::strcmp(patches[j].symbol, p.symbol) == 0)
                return std::string(p.symbol) + " is listed twice in the patch list";
    }
    return {};
}

// `library`: null for the executable (its slots are recorded, so restore
// puts them back), else the path suffix of a loaded library (not recorded:
// its patch lasts as long as the process).
PatchResult patch_all(std::span<const Patch> patches, const char* library) {
    if (std::string error = check_list(patches); !error.empty()) return failed(std::move(error));
    ElfImage image;
    std::string error;
    const bool found = library == nullptr ? find_executable_image(image, error)
                                          : find_library_image(library, image, error);
    if (!found) return failed(std::move(error));
    const bool record = library == nullptr;

    // Plan every write before changing anything.
    std::vector<SymbolState> states(patches.size());
    PlannedSlot planned[kMaxSlots];
    std::size_t planned_count = 0, new_slots = 0;
    bool too_many = false;
    for_each_import_slot(image, [&](const ImportSlot& s) {
        std::size_t i = 0;
        while (i < patches.size() && std::strcmp(patches[i].symbol, s.symbol) != 0) ++i;
        if (i == patches.size()) return;
        for (std::size_t k = 0; k < planned_count; ++k)
            if (planned[k].slot == s.slot) return;
        const PatchedSlot* known = find_patched(s.slot);
        void* const before = load_slot(s.slot);
        void* real = known != nullptr ? known->real : before;
        SymbolState& state = states[i];
        // A slot the loader has not bound yet (lazy binding: a postgres
        // built from source without -z now) holds a PLT stub. The function
        // to keep is the one the loader would bind on the first call: the
        // global scope's definition, which dlsym(RTLD_DEFAULT) finds the same
        // way. Restoring writes that function, as if the call had bound it.
        // (A library's lazily bound slot may simply be overwritten: nothing
        // is recorded to restore, and its PLT stub is not a function to keep.)
        if (record && known == nullptr && image_contains(image, real)) {
            void* const bound = dlsym(RTLD_DEFAULT, s.symbol);
            if (bound != nullptr && !image_contains(image, bound)) real = bound;
            else state.unbound = true;
        }
        if (state.found && state.real != real) state.inconsistent = true;
        state.found = true;
        state.real = real;
        if (planned_count == kMaxSlots) {
            too_many = true;
            return;
        }
        planned[planned_count++] = PlannedSlot{s.slot, before, real, i, known != nullptr};
        if (known == nullptr) ++new_slots;
    });

    list_symbols(error, record ? "not imported by the executable" : "not imported by the library", patches, states,
                 [](const SymbolState& s) { return !s.found; });
    list_symbols(error, "not bound yet and not found by the dynamic linker (link postgres with -z now, or set LD_BIND_NOW=1 in its environment)", patches, states,
                 [](const SymbolState& s) { return s.unbound; });
    list_symbols(error, "bound to different functions in different slots", patches, states,
                 [](const SymbolState& s) { return s.inconsistent; });
    if (too_many || (record && g_patched_count + new_slots > kMaxSlots))
        error += std::string(error.empty() ? "" : "; ") + "more than " + std::to_string(kMaxSlots) +
                 " GOT slots would be patched";
    WritableWindow window(image);
    for (std::size_t k = 0; k < planned_count && error.empty(); ++k)
        if (!window.add(planned[k].slot)) error = "the slots span too many pages";
    if (!error.empty()) return failed("nothing patched: " + error);
    if (!window.open()) return failed(std::string("nothing patched: ") + window.error());

    // From here on nothing allocates until the outcome is known.
    const std::size_t patched_before = g_patched_count;
    for (std::size_t k = 0; k < planned_count; ++k) {
        const PlannedSlot& p = planned[k];
        if (!p.known && record) g_patched[g_patched_count++] = PatchedSlot{p.slot, p.real};
        store_slot(p.slot, patches[p.patch].replacement);
    }
    if (!window.close()) {
        // Undo, so that "failed" still means "nothing changed". The pages
        // that did close are read-only again: reopen them first.
        char why[192];
        std::snprintf(why, sizeof why, "%s", window.error());
        if (!window.open())
            return failed(std::string("patched, but ") + why + "; and reopening to undo failed: " + window.error() +
                          " (restore_executable_got() undoes the patch)");
        for (std::size_t k = 0; k < planned_count; ++k) store_slot(planned[k].slot, planned[k].before);
        g_patched_count = patched_before;
        const bool closed = window.close();
        return failed(std::string("nothing patched: ") + why + (closed ? "" : " (a page is left writable)"));
    }
    for (std::size_t i = 0; i < patches.size(); ++i)
        if (patches[i].original != nullptr) *patches[i].original = states[i].real;
    return succeeded();
}

PatchResult restore_all() {
    if (g_patched_count == 0) return succeeded();
    ElfImage image;
    std::string error;
    if (!find_executable_image(image, error)) return failed(std::move(error));
    WritableWindow window(image);
    for (std::size_t i = 0; i < g_patched_count; ++i)
        if (!window.add(g_patched[i].slot)) return failed("nothing restored: the slots span too many pages");
    if (!window.open()) return failed(std::string("nothing restored: ") + window.error());
    for (std::size_t i = 0; i < g_patched_count; ++i) store_slot(g_patched[i].slot, g_patched[i].real);
    g_patched_count = 0;
    if (!window.close()) return failed(std::string("restored, but ") + window.error());
    return succeeded();
}

}  // namespace

PatchResult patch_library_got(const char* path_suffix, std::span<const Patch> patches) noexcept {
    try {
        if (path_suffix == nullptr) return failed_without_memory("no library named");
        return patch_all(patches, path_suffix);
    } catch (const std::bad_alloc&) {
        return failed_without_memory("out of memory");
    } catch (...) {
        return failed_without_memory("internal error");
    }
}

int patch_imports_everywhere(const char* symbol, void* replacement, std::string& error) noexcept {
    try {
        int changed = 0;
        for (const ElfImage& image : loaded_library_images()) {
            void** slots[8];  // a function is imported through one slot, two with gold
            std::size_t count = 0;
            bool too_many = false;
            for_each_import_slot(image, [&](const ImportSlot& s) {
                if (std::strcmp(s.symbol, symbol) != 0 || load_slot(s.slot) == replacement) return;
                if (count == std::size(slots))
                    too_many = true;
                else
                    slots[count++] = s.slot;
            });
            if (too_many) {
                error = std::string("a library imports ") + symbol + " through too many slots";
                return -1;
            }
            if (count == 0) continue;
            WritableWindow window(image);
            for (std::size_t i = 0; i < count; ++i)
                if (!window.add(slots[i])) {
                    error = "the slots span too many pages";
                    return -1;
                }
            if (!window.open()) {
                error = window.error();
                return -1;
            }
            for (std::size_t i = 0; i < count; ++i) store_slot(slots[i], replacement);
            changed += static_cast<int>(count);
            if (!window.close()) {
                error = std::string("patched, but ") + window.error();
                return -1;
            }
        }
        return changed;
    } catch (...) {
        return -1;
    }
}

PatchResult patch_executable_got(std::span<const Patch> patches) noexcept {
    try {
        return patch_all(patches, nullptr);
    } catch (const std::bad_alloc&) {
        return failed_without_memory("out of memory");
    } catch (...) {
        return failed_without_memory("internal error");
    }
}

PatchResult restore_executable_got() noexcept {
    try {
        return restore_all();
    } catch (const std::bad_alloc&) {
        return failed_without_memory("out of memory");
    } catch (...) {
        return failed_without_memory("internal error");
    }
}

ImportsResult executable_imports() noexcept {
    ImportsResult result;
    try {
        ElfImage image;
        if (!find_executable_image(image, result.error)) return result;
        for_each_import_slot(image,
                             [&](const ImportSlot& s) { result.imports.push_back(Import{s.symbol, s.kind, s.slot}); });
        result.ok = true;
    } catch (...) {
        result.imports.clear();
        result.ok = false;
        try {
            result.error = "out of memory";
        } catch (...) {
        }
    }
    return result;
}

}  // namespace pg_rdma::interpose
