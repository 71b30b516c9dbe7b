// Redirects functions the executable imports by rewriting its GOT slots.
// This is how pg_rdma reaches PostgreSQL's recv/send/epoll calls: PG 15 has
// no transport hook, and its binary is linked BIND_NOW, so exporting `recv`
// from a library changes nothing (README.md in this folder).
//
// Every call is noexcept and reports failure as a value: the caller is
// _PG_init, which must log a WARNING and carry on serving TCP, never stop
// the server. Running out of memory is reported too ("out of memory").
//
// Rules (see README.md):
//   - Patch in the postmaster's _PG_init, before any fork and while no other
//     thread runs: the slots are written with single atomic stores, but a
//     page is briefly writable and the registry of patched slots is not
//     locked. Forked children inherit the patched GOT.
//   - Only the executable's own calls are redirected; calls made inside
//     libraries (libpq, libssl) go through their own GOTs.
//   - A function pointer the program loaded from a GLOB_DAT slot before the
//     patch keeps pointing at the real function.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "server_ext/interpose/elf_image.hpp"

namespace pg_rdma::interpose {

struct Patch {
    const char* symbol;  // the imported function's name, without version: "recv"
    void* replacement;   // what the executable's calls reach from now on
    void** original;     // receives the real function (may be null)
};

struct PatchResult {
    bool ok = false;
    std::string error;  // empty when ok; else one sentence for a WARNING
};

// Points every GOT slot of each symbol (its JUMP_SLOT and its GLOB_DAT,
// whichever the executable has) at the replacement, and stores the real
// function in *original. All or nothing: when a symbol is not imported, a
// slot is not bound yet (lazy binding), a symbol is listed twice, or a page
// cannot be made writable, no slot and no *original is changed, and `error`
// names every symbol at fault and why.
//
// Patching a symbol again is allowed and replaces the earlier replacement;
// *original is still the real function, never an earlier replacement, so
// running the same patch list twice is harmless.
PatchResult patch_executable_got(std::span<const Patch> patches) noexcept;

// The same for a loaded shared library, named by the end of its path
// ("/libpq.so.5"): the calls that library makes are redirected. Meant for a
// library loaded after fork (libpq in a walreceiver), patched once in the
// process that uses it; not undone by restore_executable_got().
PatchResult patch_library_got(const char* path_suffix, std::span<const Patch> patches) noexcept;

// Points the slots of `symbol` in every loaded library that imports it at
// `replacement` (slots already there are left alone): for a function the
// executable defines and extensions call, whose callers are loaded at
// different times. Call it again after more libraries are loaded. Not undone
// by restore_executable_got(); returns how many slots it changed, or -1
// (with `error`) when a page could not be made writable.
int patch_imports_everywhere(const char* symbol, void* replacement, std::string& error) noexcept;

// Puts back the real function in every slot patched so far (for tests, and
// for an extension that gives up). Nothing patched: ok, no-op.
PatchResult restore_executable_got() noexcept;

// One import slot of the executable (for diagnostics and tests).
struct Import {
    std::string symbol;
    SlotKind kind;
    void** slot;
};

struct ImportsResult {
    bool ok = false;
    std::vector<Import> imports;  // in relocation-table order, JUMP_SLOT first
    std::string error;
};

// Every function the executable imports through a GOT slot.
ImportsResult executable_imports() noexcept;

}  // namespace pg_rdma::interpose
