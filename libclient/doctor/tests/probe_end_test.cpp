// How a probe that did not reach its echo is sorted: where the client's
// upgrade stopped, and its errno.
#include "testing/catch.hpp"

#include <cerrno>

#include "libclient/doctor/probe_end.hpp"

using namespace pg_rdma::doctor;

TEST_CASE("a 'D' is a decline wherever it came") {
    CHECK(classify_probe_end(UpgradeStage::AwaitingReply, ECONNREFUSED, true) == ProbeEnd::Declined);
}

TEST_CASE("'E' is PostgreSQL without pg_rdma") {
    CHECK(classify_probe_end(UpgradeStage::AwaitingReply, EPROTONOSUPPORT, false) == ProbeEnd::NoPgRdma);
}

TEST_CASE("refusals before the request are this host's") {
    for (const int code : {ENOMEM, ENODEV, ELIBACC, EMFILE, ENFILE})
        CHECK(classify_probe_end(UpgradeStage::Requesting, code, false) == ProbeEnd::LocalRefused);
}

TEST_CASE("a close or a strange byte instead of a reply is no PostgreSQL") {
    CHECK(classify_probe_end(UpgradeStage::AwaitingReply, ECONNRESET, false) == ProbeEnd::NotPostgres);
    CHECK(classify_probe_end(UpgradeStage::AwaitingReply, EPROTO, false) == ProbeEnd::NotPostgres);
    CHECK(classify_probe_end(UpgradeStage::Requesting, ECONNRESET, false) == ProbeEnd::NotPostgres);
}

TEST_CASE("no reply in time is no answer") {
    CHECK(classify_probe_end(UpgradeStage::AwaitingReply, ETIMEDOUT, false) == ProbeEnd::NoAnswer);
}

TEST_CASE("after 'R', a failure is the RDMA connection's, the route's included") {
    CHECK(classify_probe_end(UpgradeStage::AwaitingReply, EADDRNOTAVAIL, false) == ProbeEnd::RdmaFailed);
    CHECK(classify_probe_end(UpgradeStage::AwaitingReply, ENODEV, false) == ProbeEnd::RdmaFailed);
    CHECK(classify_probe_end(UpgradeStage::Connecting, ETIMEDOUT, false) == ProbeEnd::RdmaFailed);
}
