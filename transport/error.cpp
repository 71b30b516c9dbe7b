#include "transport/error.hpp"

#include <cerrno>
#include <cstring>
#include <utility>

namespace pg_rdma::transport {

bool fail(Error& err, int code, std::string message) {
    err.code = code;
    err.message = std::move(message);
    errno = code;
    return false;
}

bool fail_errno(Error& err, int code, const std::string& what) {
    return fail(err, code, what + ": " + std::strerror(code));
}

}  // namespace pg_rdma::transport
