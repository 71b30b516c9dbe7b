#include "transport/setup_step.hpp"

#include <cerrno>
#include <exception>
#include <limits>
#include <new>

#include <fmt/format.h>

namespace pg_rdma::transport {

int ms_until(Deadline deadline) noexcept {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - SetupClock::now()).count();
    if (left <= 0) return 0;
    return left > std::numeric_limits<int>::max() ? std::numeric_limits<int>::max() : static_cast<int>(left);
}

bool wait_for(const Want& want, Deadline deadline, Error& err) noexcept {
    Want copy = want;  // poll() writes revents
    for (;;) {
        const int rc = poll(copy.fds.data(), copy.count, ms_until(deadline));
        if (rc >= 0) return true;
        if (errno == EINTR) {
            if (passed(deadline)) return true;
            continue;
        }
        const int code = errno;
        try {
            return fail_errno(err, code, "poll(setup descriptors)");
        } catch (...) {
            fail_from_exception(err, "poll(setup descriptors)");
            return false;
        }
    }
}

void fail_from_exception(Error& err, const char* where) noexcept {
    int code = EIO;
    const char* what = "unexpected exception";
    try {
        throw;
    } catch (const std::bad_alloc&) {
        code = ENOMEM;
        what = "out of memory";
    } catch (const std::exception& e) {
        what = e.what();
    } catch (...) {
    }
    err.code = code;
    try {
        err.message = fmt::format("{}: {}", where, what);
    } catch (...) {
        err.message.clear();  // keeps its buffer: cannot throw
    }
    errno = code;
}

}  // namespace pg_rdma::transport
