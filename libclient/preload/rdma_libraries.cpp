// The forwarders of rdma_libraries.hpp: one definition per librdmacm and
// libibverbs function the transport calls by name, each looked up in the
// symbol version a link against the library would bind, its default one
// (rdma_libraries_test checks each against dlsym's answer), and the loading
// itself.
#include "libclient/preload/rdma_libraries.hpp"

#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <type_traits>

#include "transport/rdma_setup.hpp"

// verbs.h routes ibv_query_port through an inline function that calls the
// exported one for providers without their own; that exported one is what
// is defined here.
#undef ibv_query_port

namespace pg_rdma::client {
namespace {

constexpr const char* kRdmacmSoname = "librdmacm.so.1";
constexpr const char* kVerbsSoname = "libibverbs.so.1";
enum class Library { Rdmacm, Verbs };
// Where a failed load sends the user: the Debian packages that hold the
// libraries and the device drivers (providers) libibverbs loads.
constexpr const char* kInstallHint =
    "install rdma-core's user-space libraries (Debian: apt install librdmacm1 libibverbs1 ibverbs-providers)";

// X(library, symbol version, return type, name, parameters, arguments)
#define PG_RDMA_FORWARDED_FUNCTIONS(X)                                                                            \
    X(Verbs, "IBVERBS_1.1", void, ibv_ack_cq_events, (ibv_cq * cq, unsigned int nevents), (cq, nevents))         \
    X(Verbs, "IBVERBS_1.1", ibv_pd*, ibv_alloc_pd, (ibv_context * context), (context))                          \
    X(Verbs, "IBVERBS_1.1", int, ibv_close_device, (ibv_context * context), (context))                          \
    X(Verbs, "IBVERBS_1.0", ibv_comp_channel*, ibv_create_comp_channel, (ibv_context * context), (context))     \
    X(Verbs, "IBVERBS_1.1", ibv_cq*, ibv_create_cq,                                                              \
      (ibv_context * context, int cqe, void* cq_context, ibv_comp_channel* channel, int comp_vector),           \
      (context, cqe, cq_context, channel, comp_vector))                                                          \
    X(Verbs, "IBVERBS_1.1", ibv_qp*, ibv_create_qp, (ibv_pd * pd, ibv_qp_init_attr * attr), (pd, attr))         \
    X(Verbs, "IBVERBS_1.1", int, ibv_dealloc_pd, (ibv_pd * pd), (pd))                                           \
    X(Verbs, "IBVERBS_1.1", int, ibv_dereg_mr, (ibv_mr * mr), (mr))                                             \
    X(Verbs, "IBVERBS_1.0", int, ibv_destroy_comp_channel, (ibv_comp_channel * channel), (channel))             \
    X(Verbs, "IBVERBS_1.1", int, ibv_destroy_cq, (ibv_cq * cq), (cq))                                           \
    X(Verbs, "IBVERBS_1.1", int, ibv_destroy_qp, (ibv_qp * qp), (qp))                                           \
    X(Verbs, "IBVERBS_1.1", void, ibv_free_device_list, (ibv_device * *list), (list))                           \
    X(Verbs, "IBVERBS_1.1", int, ibv_get_cq_event, (ibv_comp_channel * channel, ibv_cq * *cq, void** context),  \
      (channel, cq, context))                                                                                    \
    X(Verbs, "IBVERBS_1.1", ibv_device**, ibv_get_device_list, (int* num_devices), (num_devices))               \
    X(Verbs, "IBVERBS_1.1", const char*, ibv_get_device_name, (ibv_device * device), (device))                  \
    X(Verbs, "IBVERBS_1.1", int, ibv_modify_qp, (ibv_qp * qp, ibv_qp_attr * attr, int mask), (qp, attr, mask))  \
    X(Verbs, "IBVERBS_1.1", ibv_context*, ibv_open_device, (ibv_device * device), (device))                      \
    X(Verbs, "IBVERBS_1.1", int, ibv_query_device, (ibv_context * context, ibv_device_attr * attr), (context, attr)) \
    X(Verbs, "IBVERBS_1.1", int, ibv_query_port, (ibv_context * context, uint8_t port, _compat_ibv_port_attr * attr), \
      (context, port, attr))                                                                                     \
    X(Verbs, "IBVERBS_1.8", ibv_mr*, ibv_reg_mr_iova2,                                                           \
      (ibv_pd * pd, void* addr, size_t length, uint64_t iova, unsigned int access),                             \
      (pd, addr, length, iova, access))                                                                          \
    X(Verbs, "IBVERBS_1.1", const char*, ibv_wc_status_str, (ibv_wc_status status), (status))                   \
    X(Rdmacm, "RDMACM_1.0", int, rdma_ack_cm_event, (rdma_cm_event * event), (event))                           \
    X(Rdmacm, "RDMACM_1.0", int, rdma_connect, (rdma_cm_id * id, rdma_conn_param * param), (id, param))         \
    X(Rdmacm, "RDMACM_1.0", rdma_event_channel*, rdma_create_event_channel, (void), ())                         \
    X(Rdmacm, "RDMACM_1.0", int, rdma_create_id,                                                                 \
      (rdma_event_channel * channel, rdma_cm_id * *id, void* context, rdma_port_space ps),                      \
      (channel, id, context, ps))                                                                                \
    X(Rdmacm, "RDMACM_1.0", int, rdma_create_qp, (rdma_cm_id * id, ibv_pd * pd, ibv_qp_init_attr * attr),       \
      (id, pd, attr))                                                                                            \
    X(Rdmacm, "RDMACM_1.0", void, rdma_destroy_event_channel, (rdma_event_channel * channel), (channel))        \
    X(Rdmacm, "RDMACM_1.0", int, rdma_destroy_id, (rdma_cm_id * id), (id))                                      \
    X(Rdmacm, "RDMACM_1.0", void, rdma_destroy_qp, (rdma_cm_id * id), (id))                                     \
    X(Rdmacm, "RDMACM_1.0", int, rdma_disconnect, (rdma_cm_id * id), (id))                                      \
    X(Rdmacm, "RDMACM_1.2", int, rdma_establish, (rdma_cm_id * id), (id))                                       \
    X(Rdmacm, "RDMACM_1.0", const char*, rdma_event_str, (rdma_cm_event_type event), (event))                   \
    X(Rdmacm, "RDMACM_1.0", int, rdma_get_cm_event, (rdma_event_channel * channel, rdma_cm_event * *event),     \
      (channel, event))                                                                                          \
    X(Rdmacm, "RDMACM_1.2", int, rdma_init_qp_attr, (rdma_cm_id * id, ibv_qp_attr * attr, int* mask),           \
      (id, attr, mask))                                                                                          \
    X(Rdmacm, "RDMACM_1.0", int, rdma_resolve_addr,                                                              \
      (rdma_cm_id * id, sockaddr * src, sockaddr * dst, int timeout_ms), (id, src, dst, timeout_ms))            \
    X(Rdmacm, "RDMACM_1.0", int, rdma_resolve_route, (rdma_cm_id * id, int timeout_ms), (id, timeout_ms))     \
    X(Rdmacm, "RDMACM_1.0", int, rdma_set_option,                                                                \
      (rdma_cm_id * id, int level, int optname, void* optval, size_t optlen), (id, level, optname, optval, optlen))

#define PG_RDMA_ENUMERATOR(library, version, ret, name, params, args) name,
enum class Function : std::size_t { PG_RDMA_FORWARDED_FUNCTIONS(PG_RDMA_ENUMERATOR) kCount };
#undef PG_RDMA_ENUMERATOR

#define PG_RDMA_SYMBOL(library, version, ret, name, params, args) \
    ForwardedFunction{Library::library == Library::Verbs ? kVerbsSoname : kRdmacmSoname, #name, version},
constexpr std::array<ForwardedFunction, static_cast<std::size_t>(Function::kCount)> kFunctions{
    {PG_RDMA_FORWARDED_FUNCTIONS(PG_RDMA_SYMBOL)}};
#undef PG_RDMA_SYMBOL

constexpr std::size_t kProblemBytes = 512;  // one message line

struct Loaded {
    std::array<void*, kFunctions.size()> functions{};
    std::array<char, kProblemBytes> problem{};  // empty when every function was found
};

// Filled once, under g_load_lock, then published by g_loaded. A plain
// mutex rather than a function-local static: fork() takes it first (the
// pthread_atfork handlers installed below), so a child never inherits a
// load another thread was half-way through, which it could neither finish
// nor wait out.
Loaded g_libraries;
std::atomic<const Loaded*> g_loaded{nullptr};
std::mutex g_load_lock;

void set_problem(Loaded& out, const char* what, const char* detail) noexcept {
    std::snprintf(out.problem.data(), out.problem.size(), "the RDMA libraries could not be loaded (%s%s%s): %s", what,
                  *what != '\0' && detail != nullptr ? ": " : "", detail != nullptr ? detail : "", kInstallHint);
}

void load(Loaded& out) noexcept {
    // Local: they and the libraries they bring (libnl, the providers)
    // never join the program's global scope. Never closed: the transport
    // keeps their functions and objects until exit. librdmacm first: it
    // loads libibverbs, which the second call finds.
    void* const rdmacm = dlopen(kRdmacmSoname, RTLD_NOW | RTLD_LOCAL);
    if (rdmacm == nullptr) return set_problem(out, "", dlerror());  // dlerror names the file
    void* const verbs = dlopen(kVerbsSoname, RTLD_NOW | RTLD_LOCAL);
    if (verbs == nullptr) return set_problem(out, "", dlerror());
    for (std::size_t i = 0; i < kFunctions.size(); ++i) {
        const ForwardedFunction& f = kFunctions[i];
        out.functions[i] = dlvsym(std::strcmp(f.soname, kVerbsSoname) == 0 ? verbs : rdmacm, f.name, f.version);
        if (out.functions[i] == nullptr) {
            // An rdma-core older than the one this library was built
            // against (ibv_reg_mr_iova2 came with IBVERBS_1.8).
            char what[kProblemBytes / 2];
            std::snprintf(what, sizeof what, "%s has no %s@%s, which this build calls: it is older than the "
                          "rdma-core pg_rdma was built with", f.soname, f.name, f.version);
            return set_problem(out, what, nullptr);
        }
    }
}

const Loaded& loaded() noexcept {
    if (const Loaded* l = g_loaded.load(std::memory_order_acquire); l != nullptr) return *l;
    const std::lock_guard guard(g_load_lock);
    if (g_loaded.load(std::memory_order_relaxed) == nullptr) {
        load(g_libraries);
        g_loaded.store(&g_libraries, std::memory_order_release);
    }
    return g_libraries;
}

// What a forwarder returns when the libraries are missing, with errno
// ELIBACC: NULL for a pointer, -1 for an int (a failure to each caller here,
// though ibv_modify_qp, ibv_query_port, ibv_dereg_mr and the ibv_destroy
// and ibv_dealloc functions report theirs as a positive errno: they are
// only ever called on objects made after a load that succeeded). Names are
// for messages, so they stay printable.
template <class R>
R failure() noexcept {
    if constexpr (std::is_void_v<R>) {
        return;
    } else if constexpr (std::is_same_v<R, const char*>) {
        return "(RDMA libraries not loaded)";
    } else if constexpr (std::is_pointer_v<R>) {
        return nullptr;
    } else {
        return -1;
    }
}

}  // namespace

const char* rdma_libraries_problem() noexcept {
    const Loaded& l = loaded();
    return l.problem[0] == '\0' ? nullptr : l.problem.data();
}

std::span<const ForwardedFunction> forwarded_functions() noexcept { return kFunctions; }

namespace {

void lock_for_fork() noexcept { g_load_lock.lock(); }
void unlock_after_fork() noexcept { g_load_lock.unlock(); }

// At load, before any session: the transport's setup asks first, and a
// fork waits for a load in progress. No fork handler of the transport's
// calls a forwarder before a load has finished (it has nothing to hand over
// until a connection exists), so none can meet the lock held here.
[[maybe_unused]] const bool g_installed =
    (transport::install_rdma_library_loader(&rdma_libraries_problem),
     pthread_atfork(&lock_for_fork, &unlock_after_fork, &unlock_after_fork), true);

}  // namespace

}  // namespace pg_rdma::client

// The forwarders, under the functions' own names (C linkage, as declared
// by the headers included above, which checks every signature here).
#define PG_RDMA_FORWARDER(library, version, ret, name, params, args)                                      \
    extern "C" ret name params {                                                                          \
        using pg_rdma::client::Function;                                                                  \
        const auto& libraries = pg_rdma::client::loaded();                                                \
        if (libraries.problem[0] != '\0') {                                                               \
            errno = ELIBACC;                                                                              \
            return pg_rdma::client::failure<ret>();                                                       \
        }                                                                                                 \
        using Pointer = ret(*) params;                                                                    \
        return reinterpret_cast<Pointer>(libraries.functions[static_cast<std::size_t>(Function::name)]) args; \
    }
PG_RDMA_FORWARDED_FUNCTIONS(PG_RDMA_FORWARDER)
#undef PG_RDMA_FORWARDER
