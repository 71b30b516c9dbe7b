// The kernel's rdma netlink answers that say which drivers serve the
// devices: reading them, and the requests that ask.
#include "testing/catch.hpp"

#include <linux/netlink.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/rdma_netlink.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "transport/rdma_netlink.hpp"

using namespace pg_rdma::transport::rdma_netlink_detail;

namespace {

constexpr std::uint16_t kDeviceGet = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET);
constexpr std::uint16_t kChardevGet = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET_CHARDEV);

struct Message {
    std::uint16_t type;
    std::vector<std::uint8_t> attributes;

    template <typename T>
    Message& attr(std::uint16_t attr_type, const T& value) {
        const nlattr h{static_cast<std::uint16_t>(NLA_HDRLEN + sizeof value), attr_type};
        const auto* hp = reinterpret_cast<const std::uint8_t*>(&h);
        attributes.insert(attributes.end(), hp, hp + sizeof h);
        const auto* vp = reinterpret_cast<const std::uint8_t*>(&value);
        attributes.insert(attributes.end(), vp, vp + sizeof value);
        attributes.resize(NLA_ALIGN(attributes.size()), 0);
        return *this;
    }
};

std::vector<std::uint8_t> datagram(const std::vector<Message>& messages) {
    std::vector<std::uint8_t> out;
    for (const auto& m : messages) {
        const nlmsghdr h{static_cast<std::uint32_t>(NLMSG_HDRLEN + m.attributes.size()), m.type, NLM_F_MULTI, 1, 0};
        const auto* hp = reinterpret_cast<const std::uint8_t*>(&h);
        out.insert(out.end(), hp, hp + sizeof h);
        out.insert(out.end(), m.attributes.begin(), m.attributes.end());
        out.resize(NLMSG_ALIGN(out.size()), 0);
    }
    return out;
}

Message device(std::uint32_t index) {
    Message m{kDeviceGet, {}};
    m.attr(RDMA_NLDEV_ATTR_DEV_INDEX, index);
    const char name[8] = "rxe0";
    m.attr(RDMA_NLDEV_ATTR_DEV_NAME, name);
    return m;
}

Message done(int status = 0) {
    Message m{NLMSG_DONE, {}};
    const auto* p = reinterpret_cast<const std::uint8_t*>(&status);
    m.attributes.assign(p, p + sizeof status);
    return m;
}

Message error() {
    Message m{NLMSG_ERROR, {}};
    nlmsgerr e{};
    e.error = -EPERM;
    const auto* p = reinterpret_cast<const std::uint8_t*>(&e);
    m.attributes.assign(p, p + sizeof e);
    return m;
}

}  // namespace

TEST_CASE("the device dump's reply gives every device's index until its end", "[rdma_netlink]") {
    std::vector<std::uint32_t> indexes;
    bool finished = false;
    REQUIRE(read_device_dump(datagram({device(0), device(3)}), indexes, finished));
    CHECK_FALSE(finished);
    REQUIRE(read_device_dump(datagram({done()}), indexes, finished));
    CHECK(finished);
    CHECK(indexes == std::vector<std::uint32_t>{0, 3});
}

TEST_CASE("a device dump that is refused or malformed gives no answer", "[rdma_netlink]") {
    std::vector<std::uint32_t> indexes;
    bool finished = false;
    CHECK_FALSE(read_device_dump(datagram({error()}), indexes, finished));

    Message no_index{kDeviceGet, {}};
    const char name[8] = "rxe0";
    no_index.attr(RDMA_NLDEV_ATTR_DEV_NAME, name);
    CHECK_FALSE(read_device_dump(datagram({no_index}), indexes, finished));

    auto cut = datagram({device(0)});
    cut.resize(cut.size() - 4);  // the message says it is longer than the datagram
    CHECK_FALSE(read_device_dump(cut, indexes, finished));

    auto bad_attribute = datagram({device(0)});
    bad_attribute[NLMSG_HDRLEN] = 200;  // the first attribute's length runs past its message
    CHECK_FALSE(read_device_dump(bad_attribute, indexes, finished));
}

TEST_CASE("a device dump that ends with an error status is not taken as whole", "[rdma_netlink]") {
    std::vector<std::uint32_t> indexes;
    bool finished = false;
    REQUIRE(read_device_dump(datagram({device(0)}), indexes, finished));
    CHECK_FALSE(read_device_dump(datagram({done(-EMSGSIZE)}), indexes, finished));
    CHECK_FALSE(finished);
}

TEST_CASE("the uverbs device's reply gives the driver id, as 32 or 64 bits", "[rdma_netlink]") {
    Message narrow{kChardevGet, {}};
    narrow.attr(RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, std::uint32_t{RDMA_DRIVER_RXE});
    CHECK(read_driver_id(datagram({narrow})) == std::uint32_t{RDMA_DRIVER_RXE});

    Message wide{kChardevGet, {}};
    wide.attr(RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, std::uint64_t{RDMA_DRIVER_MLX5});
    CHECK(read_driver_id(datagram({wide})) == std::uint32_t{RDMA_DRIVER_MLX5});
}

TEST_CASE("a uverbs reply without a driver id, or an error, gives none", "[rdma_netlink]") {
    Message none{kChardevGet, {}};
    none.attr(RDMA_NLDEV_ATTR_DEV_INDEX, std::uint32_t{0});
    CHECK_FALSE(read_driver_id(datagram({none})));
    CHECK_FALSE(read_driver_id(datagram({error()})));
    CHECK_FALSE(read_driver_id({}));
}

TEST_CASE("the requests are well-formed netlink messages", "[rdma_netlink]") {
    const auto dump = device_dump_request(7);
    REQUIRE(dump.size() == NLMSG_HDRLEN);
    nlmsghdr h{};
    std::memcpy(&h, dump.data(), sizeof h);
    CHECK(h.nlmsg_len == dump.size());
    CHECK(h.nlmsg_type == kDeviceGet);
    CHECK((h.nlmsg_flags & NLM_F_DUMP) == NLM_F_DUMP);
    CHECK(h.nlmsg_seq == 7);

    const auto ask = driver_request(5, 8);
    std::memcpy(&h, ask.data(), sizeof h);
    CHECK(h.nlmsg_len == ask.size());
    CHECK(h.nlmsg_type == kChardevGet);
    CHECK((h.nlmsg_flags & NLM_F_DUMP) == 0);
    // Index (4 bytes) and "uverbs" with its NUL, each after a 4-byte header.
    CHECK(ask.size() == NLMSG_HDRLEN + NLA_ALIGN(NLA_HDRLEN + 4) + NLA_ALIGN(NLA_HDRLEN + 7));
    std::uint32_t index = 0;
    std::memcpy(&index, ask.data() + NLMSG_HDRLEN + NLA_HDRLEN, sizeof index);
    CHECK(index == 5);
    CHECK(std::string(reinterpret_cast<const char*>(ask.data() + NLMSG_HDRLEN + NLA_ALIGN(NLA_HDRLEN + 4) + NLA_HDRLEN)) ==
          "uverbs");
}
