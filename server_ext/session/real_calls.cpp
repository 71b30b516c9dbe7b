#include "server_ext/session/real_calls.hpp"

#include <unistd.h>

namespace pg_rdma::server {

RealCalls& real_calls() noexcept {
    static RealCalls calls{::recv, ::send, ::close, ::epoll_ctl, ::epoll_wait};
    return calls;
}

}  // namespace pg_rdma::server
