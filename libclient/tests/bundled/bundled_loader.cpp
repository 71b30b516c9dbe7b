// bundled_loader MODULE CONNINFO: loads MODULE with RTLD_LOCAL (as Python
// loads an extension module) and calls its bundled_connect(CONNINFO). The
// loader itself links no libpq. Exit: the module's answer; 2 when it
// cannot be loaded.
#include <dlfcn.h>

#include <cstdio>

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fputs("usage: bundled_loader MODULE CONNINFO\n", stderr);
        return 2;
    }
    void* module = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (module == nullptr) {
        std::fprintf(stderr, "bundled_loader: %s\n", dlerror());
        return 2;
    }
    using Connect = int (*)(const char*);
    auto connect = reinterpret_cast<Connect>(dlsym(module, "bundled_connect"));
    if (connect == nullptr) {
        std::fprintf(stderr, "bundled_loader: %s\n", dlerror());
        return 2;
    }
    return connect(argv[2]);
}
