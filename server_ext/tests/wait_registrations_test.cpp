// The bookkeeping of the epoll sets that wait on a backend's client socket.
#include <poll.h>
#include <sys/epoll.h>

#include "testing/catch.hpp"

#include "server_ext/session/wait_registrations.hpp"

using pg_rdma::server::epoll_events_for;
using pg_rdma::server::poll_events_for;
using pg_rdma::server::WaitRegistrations;

namespace {
epoll_event ev(std::uint32_t events, std::uint64_t data) {
    epoll_event e{};
    e.events = events;
    e.data.u64 = data;
    return e;
}
}  // namespace

TEST_CASE("registrations follow ADD, MOD and DEL per epoll set", "[wait_registrations]") {
    WaitRegistrations regs;
    auto a = ev(EPOLLOUT | EPOLLERR | EPOLLHUP, 11);
    regs.apply(5, EPOLL_CTL_ADD, &a);
    auto b = ev(EPOLLIN, 22);
    regs.apply(9, EPOLL_CTL_ADD, &b);
    REQUIRE(regs.all().size() == 2);
    auto a2 = ev(EPOLLIN | EPOLLRDHUP, 11);
    regs.apply(5, EPOLL_CTL_MOD, &a2);
    REQUIRE(regs.find(5) != nullptr);
    CHECK(regs.find(5)->events == (EPOLLIN | EPOLLRDHUP));
    CHECK(regs.find(5)->data == 11);
    CHECK(regs.poll_interest() == (POLLIN | POLLRDHUP));
    regs.apply(5, EPOLL_CTL_DEL, nullptr);
    CHECK(regs.find(5) == nullptr);
    CHECK(regs.find(9) != nullptr);
}

TEST_CASE("a MOD for a set that never added the socket records nothing", "[wait_registrations]") {
    WaitRegistrations regs;
    auto a = ev(EPOLLIN, 1);
    regs.apply(3, EPOLL_CTL_MOD, &a);
    CHECK(regs.all().empty());
}

TEST_CASE("closing an epoll set forgets its registration", "[wait_registrations]") {
    WaitRegistrations regs;
    auto a = ev(EPOLLIN, 1);
    regs.apply(3, EPOLL_CTL_ADD, &a);
    regs.forget_set(4);
    CHECK(regs.all().size() == 1);
    regs.forget_set(3);
    CHECK(regs.all().empty());
    CHECK(regs.poll_interest() == 0);
}

TEST_CASE("epoll and poll events map both ways; a vanished connection reads as an error", "[wait_registrations]") {
    CHECK(poll_events_for(EPOLLIN | EPOLLOUT | EPOLLRDHUP) == (POLLIN | POLLOUT | POLLRDHUP));
    CHECK(epoll_events_for(POLLIN | POLLHUP | POLLERR) == (EPOLLIN | EPOLLHUP | EPOLLERR));
    CHECK(epoll_events_for(POLLNVAL) == (EPOLLERR | EPOLLHUP));
    CHECK(epoll_events_for(0) == 0);
}
