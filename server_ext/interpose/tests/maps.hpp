// What /proc/self/maps says about an address: the tests' way to see the
// protection the kernel really has on a GOT page (not what the code under
// test believes it set).
#pragma once

#include <string>

namespace pg_rdma::interpose::test {

// The permission field ("r--p", "rw-p", ...) of the mapping holding
// `address`, or "" when no mapping holds it.
std::string mapping_permissions(const void* address);

}  // namespace pg_rdma::interpose::test
