#include "server_ext/interpose/library_function.hpp"

#include <dlfcn.h>

namespace pg_rdma::interpose {

void* library_function(const char* soname, const char* symbol) noexcept {
    if (soname == nullptr || symbol == nullptr) return nullptr;
    void* handle = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) return nullptr;
    void* address = dlsym(handle, symbol);
    // The library stays loaded: RTLD_NOLOAD only took one more reference,
    // which this gives back.
    dlclose(handle);
    return address;
}

}  // namespace pg_rdma::interpose
