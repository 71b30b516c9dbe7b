// How the benchmark reports failure: one exception type carrying a sentence
// for people, thrown from small helpers and caught once in main(). A
// benchmark run that fails prints why and exits non-zero; it never retries
// silently, so a number it prints always comes from a clean run.
#pragma once

#include <stdexcept>
#include <string>

namespace pg_rdma::perf {

struct BenchError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Throws BenchError("<what>: <strerror(errno)>").
[[noreturn]] void throw_errno(const std::string& what);

}  // namespace pg_rdma::perf
