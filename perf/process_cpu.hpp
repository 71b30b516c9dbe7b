// The CPU time this process has used, user and system together, in
// microseconds: what a measurement's phases cost each end. Under the
// counted guest (scripts/bench --counted) it is the process's instruction
// count, kernel work done in its name included, in thousands.
#pragma once

#include <sys/resource.h>

namespace pg_rdma::perf {

inline double process_cpu_us()
{
    rusage u{};
    if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
    const auto us = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec); };
    return us(u.ru_utime) + us(u.ru_stime);
}

}  // namespace pg_rdma::perf
