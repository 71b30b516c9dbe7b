// Small rdma_cm helpers shared by the active and passive setup paths.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <string>

#include "transport/error.hpp"
#include "transport/verbs_raii.hpp"

namespace pg_rdma::transport {

using SetupClock = std::chrono::steady_clock;

// A new event channel whose fd is non-blocking (Stream polls it).
CmChannelPtr make_cm_channel(Error& err);

// Waits for the next event on `channel` until `deadline`; nullptr on timeout
// (err says ETIMEDOUT and what was awaited) or failure.
CmEventPtr next_cm_event(rdma_event_channel* channel, SetupClock::time_point deadline,
                         const char* awaited, Error& err);

// Waits for `expected`; any other event is a failure described in `err`.
bool expect_cm_event(rdma_event_channel* channel, rdma_cm_event_type expected,
                     SetupClock::time_point deadline, const std::string& what, Error& err);

// "10.0.0.1:5432" / "[::1]:5432".
std::string format_address(const sockaddr* addr);
// Same IP address, port ignored; an IPv4-mapped IPv6 address equals its IPv4 one.
bool same_ip(const sockaddr* a, const sockaddr* b);

int ms_until(SetupClock::time_point deadline);

}  // namespace pg_rdma::transport
