// How transport setup reports failure: an errno value for programs and a
// sentence for people. The sentence names the call that failed and, where
// the user can do something about it, says what.
#pragma once

#include <string>

namespace pg_rdma::transport {

struct Error {
    int code = 0;         // errno value
    std::string message;  // e.g. "rdma_resolve_addr(10.0.0.9): No such device"

    [[nodiscard]] bool failed() const { return code != 0; }
};

// Fills `err`, sets errno to `code` and returns false, so setup code can
// `return fail(err, ENODEV, "...")`.
bool fail(Error& err, int code, std::string message);
// As fail(), with ": <strerror(code)>" appended to `what`, and for
// EMFILE/ENFILE what to raise (descriptor_exhaustion_hint).
bool fail_errno(Error& err, int code, const std::string& what);
// " (... raise ulimit -n / LimitNOFILE ...)" for a setup that ran out of
// descriptors, with this process's limits.
std::string descriptor_exhaustion_hint(int code);
// Fails with EMFILE/ENFILE and descriptor_exhaustion_hint() unless this
// process can open `needed` more descriptors now. Setup checks this first:
// librdmacm, short of descriptors, reports ENODEV ("No such device"), which
// would send a DBA looking for hardware.
bool check_descriptor_headroom(int needed, Error& err);

}  // namespace pg_rdma::transport
