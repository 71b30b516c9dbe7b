// The ErrorResponse the proxy sends a client it cannot carry, and which
// clients get one.
#include "testing/catch.hpp"

#include <string>

#include "libclient/proxy/refusal.hpp"
#include "protocol/byte_order.hpp"
#include "protocol/session_opener.hpp"

using namespace pg_rdma::proxy;
using pg_rdma::protocol::get_u32;

namespace {

// The fields of an ErrorResponse, code letter -> value.
std::string field(const std::vector<std::uint8_t>& message, char code)
{
    std::size_t at = 5;
    while (at < message.size() && message[at] != 0) {
        char this_code = static_cast<char>(message[at++]);
        std::string value;
        while (at < message.size() && message[at] != 0)
            value += static_cast<char>(message[at++]);
        ++at;
        if (this_code == code)
            return value;
    }
    return "(absent)";
}

std::vector<std::uint8_t> header(std::uint32_t length, std::uint32_t code)
{
    std::vector<std::uint8_t> bytes(8);
    pg_rdma::protocol::put_u32(bytes.data(), length);
    pg_rdma::protocol::put_u32(bytes.data() + 4, code);
    return bytes;
}

}  // namespace

TEST_CASE("an ErrorResponse carries severity FATAL, the SQLSTATE, message, detail and hint")
{
    auto message = error_response({kSqlStateCannotConnect, "no RDMA", "why", "what to do"});
    REQUIRE(message.size() > 5);
    CHECK(message[0] == 'E');
    CHECK(get_u32(message.data() + 1) == message.size() - 1);
    CHECK(message.back() == 0);
    CHECK(field(message, 'S') == "FATAL");
    CHECK(field(message, 'V') == "FATAL");
    CHECK(field(message, 'C') == "08001");
    CHECK(field(message, 'M') == "no RDMA");
    CHECK(field(message, 'D') == "why");
    CHECK(field(message, 'H') == "what to do");
}

TEST_CASE("empty detail and hint are left out")
{
    auto message = error_response({kSqlStateTooManyConnections, "too many", "", ""});
    CHECK(field(message, 'D') == "(absent)");
    CHECK(field(message, 'H') == "(absent)");
    CHECK(field(message, 'C') == "53300");
}

TEST_CASE("clients that opened in the clear read the answer; direct SSL and unknown bytes do not")
{
    CHECK(answers_in_clear(header(8, pg_rdma::protocol::kSslRequestCode)));
    CHECK(answers_in_clear(header(8, pg_rdma::protocol::kGssEncRequestCode)));
    // A StartupMessage judged by its header (the rest not at hand).
    CHECK(answers_in_clear(header(40, 3u << 16)));
    std::vector<std::uint8_t> client_hello{0x16, 0x03, 0x01, 0x00, 0x40, 0x01, 0x00, 0x00, 0x3c};
    CHECK_FALSE(answers_in_clear(client_hello));
    CHECK_FALSE(answers_in_clear(std::vector<std::uint8_t>{'G', 'E', 'T', ' ', '/', ' ', 'H', 'T'}));
    CHECK_FALSE(answers_in_clear(std::vector<std::uint8_t>{0, 0, 0}));
}
