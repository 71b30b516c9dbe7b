// libclient/preload/rdma_libraries.cpp on the host: this executable is not
// linked against librdmacm or libibverbs (meson.build gives it their
// headers only), so every verbs or rdma_cm call below reaches the real
// library through the forwarders, loaded on first use. The host needs no
// RDMA device for that; what a device-less host answers is the library's.
#include "testing/catch.hpp"

#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <string>

#include "libclient/preload/rdma_libraries.hpp"

using pg_rdma::client::rdma_libraries_problem;

namespace {

bool loaded_in_process(const char* soname) {
    void* handle = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
    if (handle != nullptr) dlclose(handle);
    return handle != nullptr;
}

}  // namespace

TEST_CASE("the RDMA libraries are not in the process until a forwarder is first called", "[rdma_libraries]") {
    // Catch2 runs the cases in the order of this file: this one first.
    CHECK_FALSE(loaded_in_process("librdmacm.so.1"));
    CHECK_FALSE(loaded_in_process("libibverbs.so.1"));
    CHECK(rdma_libraries_problem() == nullptr);
    CHECK(loaded_in_process("librdmacm.so.1"));
    CHECK(loaded_in_process("libibverbs.so.1"));
}

TEST_CASE("every forwarded function is found, in the version the transport was built against", "[rdma_libraries]") {
    const char* problem = rdma_libraries_problem();
    INFO((problem != nullptr ? problem : ""));
    REQUIRE(problem == nullptr);
    // The same answer on every call.
    CHECK(rdma_libraries_problem() == nullptr);
}

TEST_CASE("each function is looked up in the version a link against the library binds", "[rdma_libraries]") {
    REQUIRE(rdma_libraries_problem() == nullptr);
    REQUIRE_FALSE(pg_rdma::client::forwarded_functions().empty());
    for (const auto& f : pg_rdma::client::forwarded_functions()) {
        INFO(f.soname << ": " << f.name << "@" << f.version);
        void* handle = dlopen(f.soname, RTLD_NOW | RTLD_NOLOAD);
        REQUIRE(handle != nullptr);
        // dlsym finds the default version, the one the link editor binds; an
        // older one kept for compatibility (ibv_create_qp@IBVERBS_1.0, with
        // the old structure layout) would be another address.
        void* named = dlvsym(handle, f.name, f.version);
        CHECK(named != nullptr);
        CHECK(named == dlsym(handle, f.name));
        dlclose(handle);
    }
}

TEST_CASE("forwarders return the real functions' answers", "[rdma_libraries]") {
    CHECK(std::string(ibv_wc_status_str(IBV_WC_SUCCESS)) == "success");
    CHECK(std::string(ibv_wc_status_str(IBV_WC_RETRY_EXC_ERR)) == "transport retry counter exceeded");
    CHECK(std::string(rdma_event_str(RDMA_CM_EVENT_ESTABLISHED)) == "RDMA_CM_EVENT_ESTABLISHED");
    int count = -1;
    ibv_device** list = ibv_get_device_list(&count);
    // A list (perhaps of none) or an error from libibverbs itself, never
    // the forwarders' ELIBACC.
    if (list == nullptr) {
        CHECK(errno != ELIBACC);
    } else {
        CHECK(count >= 0);
        for (int i = 0; i < count; ++i) CHECK(ibv_get_device_name(list[i]) != nullptr);
        ibv_free_device_list(list);
    }
}
