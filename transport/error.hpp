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
// As fail(), with ": <strerror(code)>" appended to `what`.
bool fail_errno(Error& err, int code, const std::string& what);

}  // namespace pg_rdma::transport
