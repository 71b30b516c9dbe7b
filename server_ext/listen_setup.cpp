// Why SetConfigOption and not an assignment to the exported ListenAddresses:
// guc.c owns the string (it compares and frees *variable, reset_val and the
// stack entries by pointer, guc.c set_string_field), so a string put there
// behind its back may be freed or leaked by a later set. SetConfigOption
// with PGC_S_OVERRIDE lets guc.c copy and own the new value, keeps it over
// the value from postgresql.conf, and makes SHOW listen_addresses tell the
// truth. Cost: at a reload guc.c sees the file's value differ from the
// effective one and logs that listen_addresses "cannot be changed without
// restarting the server" (README.md).
#include "server_ext/listen_setup.hpp"

#include <new>
#include <string>

#include "server_ext/listen_list.hpp"
#include "server_ext/settings_gucs.hpp"

#include "server_ext/pg_headers.hpp"

namespace pg_rdma::server {
namespace {

constexpr std::size_t kProblemSize = 256;  // bytes, NUL included

// The merge in C++, with its result or its problem copied out to plain
// buffers, so no C++ object is alive when the caller raises an error.
struct MergeResult {
    char* merged = nullptr;          // palloc'd; null when nothing to add or on a problem
    char problem[kProblemSize] = {};  // empty when fine
};

void set_problem(MergeResult& out, std::string_view text) {
    const auto n = std::min(text.size(), sizeof out.problem - 1);
    std::memcpy(out.problem, text.data(), n);
    out.problem[n] = '\0';
}

MergeResult merge_addresses(const char* rdma_list, const char* pg_list) {
    MergeResult out;
    try {
        const auto list = parse_address_list(rdma_list);
        if (!list.problem.empty()) {
            set_problem(out, list.problem);
            return out;
        }
        if (list.items.empty()) return out;
        const std::string merged = merged_listen_addresses(pg_list != nullptr ? pg_list : "", list.items);
        out.merged = static_cast<char*>(palloc(merged.size() + 1));  // no error: tiny, in the postmaster
        std::memcpy(out.merged, merged.c_str(), merged.size() + 1);
    } catch (const std::bad_alloc&) {
        set_problem(out, "out of memory while merging the address lists");
    }
    return out;
}

}  // namespace

void add_rdma_listen_addresses() {
    const char* rdma_list = rdma_listen_addresses_guc();
    const MergeResult result = merge_addresses(rdma_list, ListenAddresses);
    if (result.problem[0] != '\0')
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                 errmsg("pg_rdma: invalid value for parameter \"pg_rdma.listen_addresses\": %s", result.problem),
                 errhint("List host names or addresses separated by commas, or * for every address.")));
    if (result.merged == nullptr) return;

    SetConfigOption("listen_addresses", result.merged, PGC_POSTMASTER, PGC_S_OVERRIDE);
    pfree(result.merged);
}

}  // namespace pg_rdma::server
