// The forwarders of rdma_libraries.hpp: one definition per librdmacm and
// libibverbs function the transport calls by name, each found on the first
// call with the symbol version the linker would have bound (`nm -D
// --undefined-only` of a libpq_rdma.so linked against the libraries), and
// the loading itself.
#include "libclient/preload/rdma_libraries.hpp"

#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <string>
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
// Where a failed load sends the user: the Debian packages that hold the
// libraries and the device drivers (providers) libibverbs loads.
constexpr const char* kInstallHint =
    "install rdma-core's user-space libraries (Debian: apt install librdmacm1 libibverbs1 ibverbs-providers)";

enum class Library { Rdmacm, Verbs };

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
    X(Rdmacm, "RDMACM_1.0", int, rdma_resolve_route, (rdma_cm_id * id, int timeout_ms), (id, timeout_ms))

#define PG_RDMA_ENUMERATOR(library, version, ret, name, params, args) name,
enum class Function : std::size_t { PG_RDMA_FORWARDED_FUNCTIONS(PG_RDMA_ENUMERATOR) kCount };
#undef PG_RDMA_ENUMERATOR

struct Symbol {
    Library library;
    const char* version;
    const char* name;
};

#define PG_RDMA_SYMBOL(library, version, ret, name, params, args) Symbol{Library::library, version, #name},
constexpr std::array<Symbol, static_cast<std::size_t>(Function::kCount)> kSymbols{
    {PG_RDMA_FORWARDED_FUNCTIONS(PG_RDMA_SYMBOL)}};
#undef PG_RDMA_SYMBOL

struct Loaded {
    std::array<void*, kSymbols.size()> functions{};
    std::string problem;  // empty when every function was found
};

std::string dl_problem(const char* what) {
    const char* detail = dlerror();
    return std::string("the RDMA libraries could not be loaded (") + what + ": " +
           (detail != nullptr ? detail : "unknown error") + "): " + kInstallHint;
}

Loaded load() noexcept {
    Loaded out;
    try {
        // Local: they and the libraries they bring (libnl, the providers)
        // never join the program's global scope. Never closed: the
        // transport keeps their functions and objects until exit.
        // librdmacm first: it loads libibverbs, which the second call finds.
        void* const rdmacm = dlopen(kRdmacmSoname, RTLD_NOW | RTLD_LOCAL);
        if (rdmacm == nullptr) {
            out.problem = dl_problem(kRdmacmSoname);
            return out;
        }
        void* const verbs = dlopen(kVerbsSoname, RTLD_NOW | RTLD_LOCAL);
        if (verbs == nullptr) {
            out.problem = dl_problem(kVerbsSoname);
            return out;
        }
        for (std::size_t i = 0; i < kSymbols.size(); ++i) {
            const Symbol& s = kSymbols[i];
            out.functions[i] = dlvsym(s.library == Library::Verbs ? verbs : rdmacm, s.name, s.version);
            if (out.functions[i] == nullptr) {
                // An rdma-core older than the one this library was built
                // against (ibv_reg_mr_iova2 came with IBVERBS_1.8).
                out.problem = dl_problem((std::string(s.name) + "@" + s.version).c_str());
                return out;
            }
        }
    } catch (...) {
        out.problem = "the RDMA libraries could not be loaded: out of memory";
    }
    return out;
}

const Loaded& loaded() noexcept {
    static const Loaded libraries = load();
    return libraries;
}

// What a forwarder returns when the libraries are missing, with errno
// ELIBACC: each function's own failure value. Names are for messages, so
// they stay printable.
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
    return l.problem.empty() ? nullptr : l.problem.c_str();
}

namespace {

// At load, before any session: the transport's setup asks first.
[[maybe_unused]] const bool g_loader_installed =
    (transport::install_rdma_library_loader(&rdma_libraries_problem), true);

}  // namespace

}  // namespace pg_rdma::client

// The forwarders, under the functions' own names (C linkage, as declared
// by the headers included above, which checks every signature here).
#define PG_RDMA_FORWARDER(library, version, ret, name, params, args)                                      \
    extern "C" ret name params {                                                                          \
        using pg_rdma::client::Function;                                                                  \
        if (pg_rdma::client::rdma_libraries_problem() != nullptr) {                                       \
            errno = ELIBACC;                                                                              \
            return pg_rdma::client::failure<ret>();                                                       \
        }                                                                                                 \
        using Pointer = ret(*) params;                                                                    \
        return reinterpret_cast<Pointer>(                                                                 \
            pg_rdma::client::loaded().functions[static_cast<std::size_t>(Function::name)]) args;          \
    }
PG_RDMA_FORWARDED_FUNCTIONS(PG_RDMA_FORWARDER)
#undef PG_RDMA_FORWARDER
