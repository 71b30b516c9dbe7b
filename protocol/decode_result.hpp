// Outcome of decoding bytes that came from a peer.
//
// Every decoder in protocol/ returns one of three answers and never throws:
//   Ok       - `value` holds the message and `consumed` says how many bytes it used;
//   NeedMore - the bytes so far are a valid prefix; call again with more;
//   Error    - the bytes can never become a valid message; `error` says why in
//              words fit for a log line (a static string, never peer data).
#pragma once

#include <cstddef>
#include <string_view>

namespace pg_rdma::protocol {

enum class DecodeStatus { Ok, NeedMore, Error };

template <class T>
struct Decoded {
    DecodeStatus status = DecodeStatus::Error;
    T value{};
    std::size_t consumed = 0;
    std::string_view error;

    static Decoded ok(T v, std::size_t used) { return {DecodeStatus::Ok, v, used, {}}; }
    static Decoded need_more() { return {DecodeStatus::NeedMore, T{}, 0, {}}; }
    static Decoded fail(std::string_view why) { return {DecodeStatus::Error, T{}, 0, why}; }

    [[nodiscard]] bool is_ok() const { return status == DecodeStatus::Ok; }
};

}  // namespace pg_rdma::protocol
