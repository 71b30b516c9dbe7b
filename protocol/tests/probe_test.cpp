// The probe (`pgrdma doctor`): its request is told apart from the upgrade
// request by the server, and its decline carries the outcome and reason
// whole, or is rejected, never misread.
#include "testing/catch.hpp"

#include <string>
#include <vector>

#include "protocol/probe.hpp"
#include "protocol/upgrade.hpp"

using namespace pg_rdma::protocol;

TEST_CASE("the probe request is 8 bytes: length 8 and the code RDMP") {
    const UpgradeRequestBytes expected{0, 0, 0, 8, 'R', 'D', 'M', 'P'};
    CHECK(encode_probe_request() == expected);
}

TEST_CASE("the server tells the probe from the upgrade request, and waits on their common prefix") {
    const auto probe = encode_probe_request();
    const auto r = classify_first_packet(probe);
    CHECK(r.status == DecodeStatus::Ok);
    CHECK(r.value == FirstPacket::Probe);
    CHECK(r.consumed == 8);
    CHECK(classify_first_packet(encode_upgrade_request()).value == FirstPacket::Upgrade);
    for (std::size_t n = 1; n < probe.size(); ++n)
        CHECK(classify_first_packet(std::span(probe).first(n)).status == DecodeStatus::NeedMore);
    UpgradeRequestBytes other = probe;
    other[7] = 'Q';
    CHECK(classify_first_packet(other).value == FirstPacket::Other);
}

TEST_CASE("a probe decline carries its outcome and reason whole") {
    const std::vector<std::uint8_t> bytes = encode_probe_decline("memlock", "RLIMIT_MEMLOCK is 64 KiB");
    CHECK(bytes[0] == 'D');
    const auto r = decode_probe_decline(bytes);
    REQUIRE(r.is_ok());
    CHECK(r.consumed == bytes.size());
    CHECK(r.value == ProbeDecline{"memlock", "RLIMIT_MEMLOCK is 64 KiB"});
    // Every shorter prefix waits for the rest.
    for (std::size_t n = 0; n < bytes.size(); ++n)
        CHECK(decode_probe_decline(std::span(bytes).first(n)).status == DecodeStatus::NeedMore);
}

TEST_CASE("an empty reason is a reason") {
    const auto r = decode_probe_decline(encode_probe_decline("not_accepting", ""));
    REQUIRE(r.is_ok());
    CHECK(r.value.reason.empty());
}

TEST_CASE("an outcome that is not a name is sent as unknown, a long reason is cut") {
    const std::string long_reason(kMaxProbeReasonLength + 100, 'x');
    const auto r = decode_probe_decline(encode_probe_decline("Mem Lock!", long_reason));
    REQUIRE(r.is_ok());
    CHECK(r.value.outcome == "unknown");
    CHECK(r.value.reason.size() == kMaxProbeReasonLength);
    CHECK(decode_probe_decline(encode_probe_decline("", "x")).value.outcome == "unknown");
}

TEST_CASE("a malformed decline is rejected, not misread") {
    std::vector<std::uint8_t> bytes = encode_probe_decline("memlock", "why");
    SECTION("zero-length outcome") {
        bytes[1] = 0;
        CHECK(decode_probe_decline(bytes).status == DecodeStatus::Error);
    }
    SECTION("outcome longer than allowed") {
        bytes[1] = static_cast<std::uint8_t>(kMaxProbeOutcomeLength + 1);
        CHECK(decode_probe_decline(bytes).status == DecodeStatus::Error);
    }
    SECTION("reason longer than allowed") {
        bytes[2] = 0xFF;
        bytes[3] = 0xFF;
        CHECK(decode_probe_decline(bytes).status == DecodeStatus::Error);
    }
    SECTION("outcome with a character no outcome has") {
        bytes[4] = 'M';
        CHECK(decode_probe_decline(bytes).status == DecodeStatus::Error);
    }
    SECTION("another tag") {
        bytes[0] = 'N';
        CHECK(decode_probe_decline(bytes).status == DecodeStatus::Error);
    }
}
