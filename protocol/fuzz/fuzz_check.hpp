// Property checks shared by the protocol fuzzers. A violated property is a bug
// as real as a crash, so it stops the run the same way: libFuzzer then saves
// the input that caused it.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string_view>

#include "protocol/decode_result.hpp"

namespace pg_rdma::protocol::fuzz {

inline void require(bool holds, const char* property) {
    if (holds) return;
    std::fprintf(stderr, "protocol fuzz: property violated: %s\n", property);
    __builtin_trap();
}

// A reason is a fixed log text: non-empty and printable.
inline bool is_log_text(std::string_view s) {
    if (s.empty()) return false;
    for (const char c : s)
        if (c < ' ' || c > '~') return false;
    return true;
}

// What every decoder promises, whatever the input (decode_result.hpp).
template <class T>
void check_decoded(const Decoded<T>& r, std::size_t size) {
    require(r.consumed <= size, "consumed <= input size");
    switch (r.status) {
        case DecodeStatus::Ok: require(r.error.empty(), "Ok carries no reason"); break;
        case DecodeStatus::NeedMore:
            require(r.consumed == 0 && r.error.empty(), "NeedMore consumes nothing and has no reason");
            break;
        case DecodeStatus::Error:
            require(r.consumed == 0, "Error consumes nothing");
            require(is_log_text(r.error), "Error has a printable reason");
            break;
    }
}

}  // namespace pg_rdma::protocol::fuzz
