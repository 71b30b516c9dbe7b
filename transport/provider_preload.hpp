// Loading only the rdma-core providers that this host's RDMA devices need.
//
// libibverbs' first device scan in a process (ibv_get_device_list, or
// librdmacm's first call, which makes one) offers each device to the
// providers already loaded and, only if a device is left unclaimed,
// dlopen()s every provider its configuration lists: 17 on Debian 12, each
// mapped, relocated and started although at most one or two serve a device
// here. That is paid once per process, and a PostgreSQL backend is a new
// process for every session it serves, as is every client program. In the
// Soft-RoCE guest a client's session cost about 100 page faults and, by
// the medians of twelve runs, 0.2 s of CPU more with all of them than with
// rxe's alone (perf/FINDINGS-archive.md, "Where a session's CPU goes on the
// client").
//
// So before that first scan, preload_device_providers() asks the kernel
// which driver serves each RDMA device (rdma_netlink.hpp) and loads the
// provider of each of those drivers alone; the scan then finds every device
// claimed and loads nothing more. Whenever it is not sure, it loads
// nothing, and libibverbs loads every provider as it always has: a driver
// it does not know, one whose provider rdma-core's configuration does not
// name (an administrator may have removed it) or names by a path, a
// provider set by RDMAV_DRIVERS or IBV_DRIVERS, no provider file by the
// expected name, netlink refused, no device at all. The worst case is
// today's cost, never a device left without its provider: libibverbs loads
// everything when any device is unclaimed.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace pg_rdma::transport {

// Once per process, before libibverbs is first asked for devices (later
// calls return at once; a thread that comes while another is inside waits
// for it, as a provider registers itself with libibverbs unlocked). Needs
// libibverbs loaded (its directory says where the providers are): called
// before, it does nothing and a later call tries. Leaves errno as it was.
void preload_device_providers() noexcept;

// The rdma-core provider (its name in /etc/libibverbs.d) of a kernel
// driver id (enum rdma_driver_id), or nothing for one without a provider
// known here. Exposed for the unit test.
std::optional<std::string_view> provider_for_driver(std::uint32_t driver_id) noexcept;

}  // namespace pg_rdma::transport
