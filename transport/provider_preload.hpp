// Loading only the rdma-core providers that this host's RDMA devices need.
//
// libibverbs' first device scan in a process (ibv_get_device_list, or
// librdmacm's first call, which makes one) offers each device to the
// providers already loaded and, only if a device is left unclaimed,
// dlopen()s every provider its configuration lists: 17 on Debian 12, each
// mapped, relocated and started although at most one or two serve a device
// here. That is paid once per process, and a PostgreSQL backend is a new
// process for every session it serves, as is every client program. In the
// Soft-RoCE guest it was about 100 page faults and 0.1-0.15 s of CPU per
// process (perf/FINDINGS.md, "Where a session's CPU goes on the client").
//
// So before that first scan, preload_device_providers() asks the kernel
// which driver serves each RDMA device (rdma netlink, as libibverbs itself
// does) and loads the provider of each of those drivers alone; the scan
// then finds every device claimed and loads nothing more. Whenever it is
// not sure (a driver it does not know, no provider file by the expected
// name, netlink refused, no device at all), it loads nothing, and
// libibverbs loads every provider as it always has: the worst case is
// today's cost, never a device left without its provider.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace pg_rdma::transport {

// Once per process, before libibverbs is first asked for devices (later
// calls return at once). Needs libibverbs loaded (its directory says where
// the providers are). A thread that calls it while another is inside sees
// it as done: at worst its scan loads every provider, as without it.
void preload_device_providers() noexcept;

// The pure parts, for the unit test.
namespace provider_preload_detail {

// The rdma-core provider (its .driver name) of a kernel driver id
// (enum rdma_driver_id), or nothing for one without a known provider.
std::optional<std::string_view> provider_for_driver(std::uint32_t driver_id) noexcept;

// A netlink request: RDMA_NLDEV_CMD_GET as a dump of every device.
std::vector<std::uint8_t> device_dump_request(std::uint32_t seq);
// RDMA_NLDEV_CMD_GET_CHARDEV "uverbs" for the device at `index`: its reply
// carries the driver id.
std::vector<std::uint8_t> driver_request(std::uint32_t index, std::uint32_t seq);

// One datagram of the dump's reply: appends each device's index to
// `indexes`; sets `done` at NLMSG_DONE. False on anything else (an error
// message, a device without an index, a malformed message).
bool read_device_dump(std::span<const std::uint8_t> datagram, std::vector<std::uint32_t>& indexes, bool& done);
// The driver id in the reply to driver_request(); nothing on an error or
// a reply without one.
std::optional<std::uint32_t> read_driver_id(std::span<const std::uint8_t> datagram);

}  // namespace provider_preload_detail
}  // namespace pg_rdma::transport
