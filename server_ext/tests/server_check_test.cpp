// pg_rdma_check_server()'s judgement, on made-up inputs: what it reads
// from /proc/PID/limits, and each status it gives. (Its listen-address
// check against a real RDMA port runs in the guest, client_doctor.)
#include "testing/catch.hpp"

#include <unistd.h>

#include <algorithm>

#include "server_ext/server_check.hpp"

using namespace pg_rdma::server;

namespace {

constexpr const char* kLimits =
    "Limit                     Soft Limit           Hard Limit           Units     \n"
    "Max open files            1024                 524288               files     \n"
    "Max locked memory         65536                65536                bytes     \n";

CheckInputs inputs() {
    CheckInputs in;
    in.postmaster_pid = static_cast<int>(getpid());
    in.session_bytes = 400 * 1024;
    in.descriptors_per_session = 6;
    in.max_files_per_process = 1000;
    in.max_unauthenticated_sessions = 100;
    in.max_unauthenticated_memory = 64 * 1024 * 1024;
    return in;
}

const CheckRow& row(const std::vector<CheckRow>& rows, const std::string& item) {
    const auto it = std::find_if(rows.begin(), rows.end(), [&](const CheckRow& r) { return r.item == item; });
    REQUIRE(it != rows.end());
    return *it;
}

}  // namespace

TEST_CASE("the soft limits are read from /proc/PID/limits") {
    std::uint64_t soft = 0;
    bool unlimited = true;
    REQUIRE(parse_proc_limit(kLimits, "Max locked memory", soft, unlimited));
    CHECK(soft == 65536);
    CHECK_FALSE(unlimited);
    REQUIRE(parse_proc_limit(kLimits, "Max open files", soft, unlimited));
    CHECK(soft == 1024);
    REQUIRE(parse_proc_limit("Max locked memory         unlimited            unlimited            bytes\n",
                             "Max locked memory", soft, unlimited));
    CHECK(unlimited);
    CHECK_FALSE(parse_proc_limit(kLimits, "Max processes", soft, unlimited));
    CHECK_FALSE(parse_proc_limit("Max locked memory  lots  lots  bytes\n", "Max locked memory", soft, unlimited));
}

TEST_CASE("no listen address is a problem, '*' a warning") {
    CheckInputs in = inputs();
    CHECK(row(check_server(in), "listen_address").status == "problem");
    in.listen_addresses = "*";
    const CheckRow r = row(check_server(in), "listen_address");
    CHECK(r.status == "warning");
    CHECK(r.detail.find("no_device") != std::string::npos);
    in.listen_addresses = "10.0.0.1,,";
    CHECK(row(check_server(in), "listen_address").status == "problem");
}

TEST_CASE("an address without an RDMA device is a problem that says what sessions do") {
    CheckInputs in = inputs();
    in.listen_addresses = "127.0.0.1";  // never on an RDMA device
    const CheckRow r = row(check_server(in), "listen_address");
    CHECK(r.target == "127.0.0.1");
    CHECK(r.status == "problem");
    CHECK(r.detail.find("fall back to TCP (no_device)") != std::string::npos);
}

TEST_CASE("caps that admit no session are a problem") {
    CheckInputs in = inputs();
    CHECK(row(check_server(in), "setup_caps").status == "ok");
    in.max_unauthenticated_sessions = 0;
    CHECK(row(check_server(in), "setup_caps").status == "problem");
    in = inputs();
    in.max_unauthenticated_memory = 100 * 1024;  // less than one session
    CHECK(row(check_server(in), "setup_caps").status == "problem");
}

TEST_CASE("a client library that cannot be read is a warning, none is fine") {
    CheckInputs in = inputs();
    CHECK(row(check_server(in), "client_library").status == "ok");
    in.client_library = "/nonexistent/libpq_rdma.so";
    CHECK(row(check_server(in), "client_library").status == "warning");
}

TEST_CASE("this process's own limits are judged") {
    const std::vector<CheckRow> rows = check_server(inputs());
    CHECK_FALSE(row(rows, "memlock").status.empty());
    CHECK_FALSE(row(rows, "descriptors").status.empty());
}
