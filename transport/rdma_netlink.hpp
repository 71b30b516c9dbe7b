// Which kernel driver serves each RDMA device, asked over rdma netlink as
// libibverbs asks it (RDMA_NLDEV_CMD_GET as a dump for the devices, then
// RDMA_NLDEV_CMD_GET_CHARDEV "uverbs" for each one's driver id). Used by
// provider_preload.cpp; the message building and reading are pure, for the
// unit test.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace pg_rdma::transport {

// The driver id (enum rdma_driver_id) of every RDMA device, once per
// distinct driver, or nothing when the kernel would not say for one of them
// (no rdma netlink, a device without uverbs, an error, a reply that does
// not parse). Sets errno freely.
std::optional<std::vector<std::uint32_t>> rdma_device_drivers();

namespace rdma_netlink_detail {

// RDMA_NLDEV_CMD_GET as a dump of every device.
std::vector<std::uint8_t> device_dump_request(std::uint32_t seq);
// RDMA_NLDEV_CMD_GET_CHARDEV "uverbs" for the device at `index`: its reply
// carries the driver id.
std::vector<std::uint8_t> driver_request(std::uint32_t index, std::uint32_t seq);

// One datagram of the dump's reply: appends each device's index to
// `indexes`; sets `done` at an NLMSG_DONE whose status is not an error.
// False on anything else (an error message, a failed dump, a device
// without an index, a malformed message).
bool read_device_dump(std::span<const std::uint8_t> datagram, std::vector<std::uint32_t>& indexes, bool& done);
// The driver id in the reply to driver_request(); nothing on an error or
// a reply without one.
std::optional<std::uint32_t> read_driver_id(std::span<const std::uint8_t> datagram);

}  // namespace rdma_netlink_detail
}  // namespace pg_rdma::transport
