// Small rdma_cm helpers shared by the active and passive setup steps.
#pragma once

#include <sys/socket.h>

#include <string>

#include "transport/error.hpp"
#include "transport/setup_step.hpp"
#include "transport/verbs_raii.hpp"

namespace pg_rdma::transport {

// A new event channel whose fd is non-blocking: setup steps and Stream
// take events from it without ever waiting. Fails, as rdma_setup_possible()
// does, for a listener in a process forked after its parent had used RDMA.
CmChannelPtr make_cm_channel(SetupSide side, Error& err);

// Whether this process was forked from one that had already used librdmacm
// (or from a descendant of it). librdmacm keeps the verbs descriptors it
// opened in that process for good, and no call of it opens them anew. The
// kernel refuses a write() command through a descriptor another process
// opened (EACCES), which is how rxe and siw ring their doorbells; on other
// devices the child's queue pairs and pinned memory would belong to the
// parent's device context, outliving the child. So such a process makes
// every verbs resource of a new connection on a device context of its own
// (Endpoint), for every device alike, and leaves librdmacm the
// connection's management, which goes through the rdma_cm descriptor each
// event channel opens anew (transport/README.md says where librdmacm itself
// still touches the parent's context, and why that passes). Connections
// made before the fork are not concerned: they are handed over
// (fork_handover.hpp).
[[nodiscard]] bool verbs_inherited_from_parent() noexcept;

// False, with what to do, for a listener in such a process: an accepted
// connection's queue pair would have to be brought up by hand on the
// passive side as well, which nothing in PostgreSQL's process model needs
// (a backend is forked from a postmaster that never uses RDMA). Connecting
// is possible in every process.
bool rdma_setup_possible(SetupSide side, Error& err) noexcept;

// Takes the next event on `channel` into `event` if one is there, leaving
// it empty when there is none yet (wait for POLLIN on channel->fd). False,
// with `err`, only when rdma_get_cm_event failed.
bool take_cm_event(rdma_event_channel* channel, CmEventPtr& event, Error& err);

// Describes an event that is not the `expected` one as a failure of `what`:
// EHOSTUNREACH for address, route and reachability errors, ECONNREFUSED for
// the rest (a rejection, a peer that went away). Always returns false.
bool unexpected_cm_event(const rdma_cm_event& event, rdma_cm_event_type expected, const std::string& what,
                         Error& err);

// Fails with ETIMEDOUT: `what` timed out waiting for `awaited`. Returns false.
bool cm_timeout(rdma_cm_event_type awaited, const std::string& what, Error& err);

// Blocking forms, for tests and tools that drive rdma_cm by hand (setup
// itself never waits inside a step). next_cm_event waits for the next event
// until `deadline` (nullptr with ETIMEDOUT naming `awaited`, or a failure);
// a signal is not a timeout. expect_cm_event wants `expected` and describes
// any other event as unexpected_cm_event does.
CmEventPtr next_cm_event(rdma_event_channel* channel, Deadline deadline, const char* awaited, Error& err);
bool expect_cm_event(rdma_event_channel* channel, rdma_cm_event_type expected, Deadline deadline,
                     const std::string& what, Error& err);

// Parameters both sides connect and accept with.
rdma_conn_param connection_parameters();
// Sets the queue pair's local ACK timeout (kAckTimeoutExponent) on `id`,
// before rdma_connect or rdma_accept moves the QP to RTS. A kernel without
// the option keeps rdma_cm's own, derived from the path's packet lifetime
// (half a second or more on RoCE).
void set_ack_timeout(rdma_cm_id* id) noexcept;

// "10.0.0.1:5432" / "[::1]:5432".
std::string format_address(const sockaddr* addr);
// Same IP address, port ignored; an IPv4-mapped IPv6 address equals its IPv4 one.
bool same_ip(const sockaddr* a, const sockaddr* b);

}  // namespace pg_rdma::transport
