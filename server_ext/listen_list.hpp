// pg_rdma.listen_addresses as a list, and its merge into PostgreSQL's
// listen_addresses. Pure string work, no PostgreSQL headers: unit-tested on
// the host (tests/listen_list_test.cpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pg_rdma::server {

// A comma-separated list with the blanks around each item removed. "*"
// means every local address. Fails (returns the reason in `problem`) on an
// empty item or a character that cannot be part of a host name or address.
struct AddressList {
    std::vector<std::string> items;
    std::string problem;  // empty when the list is usable
};
AddressList parse_address_list(std::string_view text);

// PostgreSQL's listen_addresses with `extra` added so the postmaster also
// accepts TCP on them: items already present (compared case-insensitively)
// are not repeated; when either list holds "*" the result is "*" alone
// (binding a wildcard next to a specific address of the same port fails).
// `existing` is taken as PostgreSQL stores it (comma-separated).
std::string merged_listen_addresses(std::string_view existing, const std::vector<std::string>& extra);

}  // namespace pg_rdma::server
