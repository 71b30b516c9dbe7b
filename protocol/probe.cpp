// The probe's request and its 'D' decline; the layout is in probe.hpp.
#include "protocol/probe.hpp"

#include <algorithm>

#include "protocol/byte_order.hpp"

namespace pg_rdma::protocol {
namespace {

constexpr std::size_t kOffTag = 0;
constexpr std::size_t kOffOutcomeLength = 1;
constexpr std::size_t kOffReasonLength = 2;
static_assert(kOffReasonLength + 2 == kProbeDeclineHeaderSize);

constexpr std::string_view kUnknownOutcome = "unknown";

bool outcome_char(char c) { return (c >= 'a' && c <= 'z') || c == '_'; }

bool valid_outcome(std::string_view name) {
    return !name.empty() && name.size() <= kMaxProbeOutcomeLength && std::all_of(name.begin(), name.end(), outcome_char);
}

}  // namespace

UpgradeRequestBytes encode_probe_request() {
    UpgradeRequestBytes out{};
    put_u32(out.data(), kUpgradeRequestLength);
    put_u32(out.data() + 4, kProbeRequestCode);
    return out;
}

std::vector<std::uint8_t> encode_probe_decline(std::string_view outcome, std::string_view reason) {
    if (!valid_outcome(outcome)) outcome = kUnknownOutcome;
    reason = reason.substr(0, kMaxProbeReasonLength);
    std::vector<std::uint8_t> out(kProbeDeclineHeaderSize + outcome.size() + reason.size());
    put_u8(out.data() + kOffTag, kReplyProbeDecline);
    put_u8(out.data() + kOffOutcomeLength, static_cast<std::uint8_t>(outcome.size()));
    put_u16(out.data() + kOffReasonLength, static_cast<std::uint16_t>(reason.size()));
    std::copy(outcome.begin(), outcome.end(), out.begin() + kProbeDeclineHeaderSize);
    std::copy(reason.begin(), reason.end(),
              out.begin() + static_cast<std::ptrdiff_t>(kProbeDeclineHeaderSize + outcome.size()));
    return out;
}

Decoded<ProbeDecline> decode_probe_decline(std::span<const std::uint8_t> bytes) {
    using Result = Decoded<ProbeDecline>;
    if (bytes.empty()) return Result::need_more();
    if (get_u8(bytes.data() + kOffTag) != kReplyProbeDecline) return Result::fail("probe reply: not a decline");
    if (bytes.size() < kProbeDeclineHeaderSize) return Result::need_more();
    const std::size_t n = get_u8(bytes.data() + kOffOutcomeLength);
    const std::size_t m = get_u16(bytes.data() + kOffReasonLength);
    if (n == 0 || n > kMaxProbeOutcomeLength) return Result::fail("probe reply: outcome length out of range");
    if (m > kMaxProbeReasonLength) return Result::fail("probe reply: reason too long");
    if (bytes.size() < kProbeDeclineHeaderSize + n + m) return Result::need_more();
    const auto* p = reinterpret_cast<const char*>(bytes.data()) + kProbeDeclineHeaderSize;
    ProbeDecline decline{std::string(p, n), std::string(p + n, m)};
    if (!valid_outcome(decline.outcome)) return Result::fail("probe reply: outcome is not a name");
    return Result::ok(std::move(decline), kProbeDeclineHeaderSize + n + m);
}

}  // namespace pg_rdma::protocol
