#include "transport/error.hpp"

#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "transport/event_set.hpp"
#include "transport/settings.hpp"

namespace pg_rdma::transport {

bool fail(Error& err, int code, std::string message) {
    err.code = code;
    err.message = std::move(message);
    errno = code;
    return false;
}

bool fail_errno(Error& err, int code, const std::string& what) {
    std::string message = what + ": " + std::strerror(code);
    if (code == EMFILE || code == ENFILE) message += descriptor_exhaustion_hint(code);
    return fail(err, code, std::move(message));
}

std::string descriptor_exhaustion_hint(int code) {
    if (code == ENFILE) return " (the system-wide file table is full: raise fs.file-max)";
    rlimit lim{};
    getrlimit(RLIMIT_NOFILE, &lim);
    return fmt::format(" (this process may open {} descriptors and each RDMA connection needs {} besides its "
                       "TCP socket, {} in a process forked after its parent used RDMA: raise the limit, e.g. "
                       "ulimit -n {}, or LimitNOFILE= in the systemd unit)",
                       lim.rlim_cur, kDescriptorsPerConnection, kDescriptorsPerConnection + kOwnContextDescriptors,
                       lim.rlim_max);
}

bool check_settings(const Settings& s, Error& err) {
    const std::string_view problem = settings_problem(s);
    if (problem.empty()) return true;
    return fail(err, EINVAL, "invalid transport settings: " + std::string(problem));
}

bool check_descriptor_headroom(int needed, Error& err) {
    // Opening them is the only exact test (RLIMIT_NOFILE bounds the number,
    // not the count, and the table may have holes); eventfd needs no file.
    constexpr int kMaxProbe = 32;
    int fds[kMaxProbe];
    int opened = 0;
    int code = 0;
    for (; opened < std::min(needed, kMaxProbe); ++opened) {
        fds[opened] = eventfd(0, EFD_CLOEXEC);
        if (fds[opened] < 0) {
            code = errno;
            break;
        }
    }
    for (int i = 0; i < opened; ++i) ::close(fds[i]);
    if (code == 0) return true;
    return fail(err, code,
                fmt::format("cannot open the {} descriptors an RDMA connection needs: {}{}", needed,
                            std::strerror(code), descriptor_exhaustion_hint(code)));
}

}  // namespace pg_rdma::transport
