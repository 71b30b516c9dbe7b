// An LD_PRELOAD probe for the real PostgreSQL 15 binary: its constructor
// runs inside `postgres --version` after the dynamic linker has bound and
// write-protected the executable's GOT, and exercises the module there:
// it lists how postgres imports each call pg_rdma needs, patches them all,
// checks the slots and their pages, restores, and tries an all-or-nothing
// refusal. Then postgres carries on and prints its version, showing the
// process is intact. postgres_imports_test.cpp reads the report.
//
// Report lines, on stdout:
//   import <symbol> <JUMP_SLOT|GLOB_DAT>   one per slot
//   missing <symbol>                       not imported at all
//   patch ok|failed: <error>               the imported ones, with a dummy
//   slots patched|wrong                    every slot held the dummy
//   pages read-only|writable <perms>       /proc/self/maps after patching
//   restore ok|failed: <error>             slots hold the real functions again
//   refuse ok|wrong: <error>               a list with a made-up name changed nothing
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "server_ext/interpose/got_patch.hpp"
#include "server_ext/interpose/tests/maps.hpp"

using namespace pg_rdma::interpose;

namespace {

constexpr const char* kNeeded[] = {"recv",   "send",    "epoll_wait", "epoll_ctl",  "epoll_create1",
                                   "close",  "accept",  "poll",       "select",     "connect",
                                   "socket", "getsockopt", "setsockopt"};

// Never called: postgres makes no call between the patch and the restore.
extern "C" void pg_rdma_probe_dummy() {}

struct Report {
    std::vector<Patch> imported;
    std::vector<void**> slots;
    std::vector<void*> reals;
};

Report list_imports() {
    Report report;
    const ImportsResult imports = executable_imports();
    if (!imports.ok) std::printf("imports failed: %s\n", imports.error.c_str());
    for (const char* symbol : kNeeded) {
        bool found = false;
        for (const Import& i : imports.imports) {
            if (i.symbol != symbol) continue;
            std::printf("import %s %s\n", symbol, slot_kind_name(i.kind));
            report.slots.push_back(i.slot);
            report.reals.push_back(*i.slot);
            found = true;
        }
        if (found) report.imported.push_back(Patch{symbol, reinterpret_cast<void*>(&pg_rdma_probe_dummy), nullptr});
        else std::printf("missing %s\n", symbol);
    }
    return report;
}

bool slots_hold(const Report& report, bool dummy) {
    for (std::size_t k = 0; k < report.slots.size(); ++k)
        if (*report.slots[k] != (dummy ? reinterpret_cast<void*>(&pg_rdma_probe_dummy) : report.reals[k]))
            return false;
    return true;
}

__attribute__((constructor)) void probe() {
    const Report report = list_imports();
    const PatchResult patched = patch_executable_got(report.imported);
    std::printf("patch %s%s\n", patched.ok ? "ok" : "failed: ", patched.error.c_str());
    std::printf("slots %s\n", slots_hold(report, true) ? "patched" : "wrong");
    std::string perms;
    for (void** slot : report.slots) {
        const std::string p = test::mapping_permissions(slot);
        if (p != "r--p") perms += p + " ";
    }
    std::printf("pages %s %s\n", perms.empty() ? "read-only" : "writable", perms.c_str());
    const PatchResult restored = restore_executable_got();
    std::printf("restore %s%s\n", restored.ok && slots_hold(report, false) ? "ok" : "failed: ",
                restored.error.c_str());

    std::vector<Patch> with_unknown = report.imported;
    with_unknown.push_back(
        Patch{"pg_rdma_probe_no_such_function", reinterpret_cast<void*>(&pg_rdma_probe_dummy), nullptr});
    const PatchResult refused = patch_executable_got(with_unknown);
    const bool refused_ok = !refused.ok && refused.error.find("pg_rdma_probe_no_such_function") != std::string::npos &&
                            slots_hold(report, false);
    std::printf("refuse %s: %s\n", refused_ok ? "ok" : "wrong", refused.error.c_str());
    std::fflush(stdout);
}

}  // namespace
