// Finds a library's own definition of a function, for a call the extension
// needs to make "for real" when the executable does not import it (so
// patch_executable_got has no original to hand back), e.g. poll, which the
// PostgreSQL 15 binary does not import.
//
// Why not dlsym(RTLD_NEXT, name): its answer depends on where the caller
// sits in a lookup order it does not control (for a dlopen'ed library such
// as pg_rdma.so, the objects after it in its own dependency list; for a
// preloaded one, the global scope, where another shim may come first), so
// it can hand back some other interposer's wrapper instead of libc's
// function. Naming the library removes the guess.
#pragma once

namespace pg_rdma::interpose {

// The address of `symbol` as the already-loaded library `soname` (and its
// own dependencies) defines it, or nullptr when that library is not loaded
// in this process or does not define it. Never loads anything
// (RTLD_NOLOAD). For libc, soname is "libc.so.6".
void* library_function(const char* soname, const char* symbol) noexcept;

}  // namespace pg_rdma::interpose
