// How much inline data a queue pair gets, against the real rxe device:
// asking more than the device takes must still give inline writes (the
// largest size on the halving ladder it accepts), not lose them.
#include "testing/catch.hpp"

#include "peer_process.hpp"
#include "transport/endpoint.hpp"

using namespace pg_rdma::test;
namespace transport = pg_rdma::transport;

namespace {

constexpr std::uint16_t kUnusedPort = 18999;  // resolving a route needs a port, not a listener

// An Endpoint on a route to the guest's own address: no peer is needed to
// create the queue pair.
std::unique_ptr<transport::Endpoint> endpoint_with(std::uint32_t max_inline, std::string& why) {
    ResolvedId route;
    if (!resolve_route_to(kUnusedPort, route, why)) return nullptr;
    Settings s;
    s.max_inline = max_inline;
    transport::Error err;
    auto ep = transport::Endpoint::create(std::move(route.channel), std::move(route.id), s, err);
    if (!ep) why = err.message;
    return ep;
}

}  // namespace

TEST_CASE("a device that takes less inline data than asked still gets inline writes", "[rdma][inline]") {
    std::string why;
    // rxe takes up to 512 B: asking 1024 is refused, the next ask (512)
    // is taken. Falling back to no inline data at once would leave only
    // the room of the one scatter entry, which rxe reports as 16 B.
    auto ep = endpoint_with(transport::kMaxInline, why);
    INFO(why);
    REQUIRE(ep);
    CHECK(ep->inline_limit() == transport::next_inline_ask(transport::kMaxInline));
}

TEST_CASE("the default inline size is granted whole on rxe", "[rdma][inline]") {
    std::string why;
    auto ep = endpoint_with(Settings{}.max_inline, why);
    INFO(why);
    REQUIRE(ep);
    CHECK(ep->inline_limit() == Settings{}.max_inline);
}

TEST_CASE("inline writes turned off stay off", "[rdma][inline]") {
    std::string why;
    auto ep = endpoint_with(0, why);
    INFO(why);
    REQUIRE(ep);
    CHECK(ep->inline_limit() == 0);
}
