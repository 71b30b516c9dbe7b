// connect_timeout read as libpq 15 reads it.
#include "testing/catch.hpp"

#include "libclient/conninfo/connect_timeout.hpp"

using pg_rdma::conninfo::connect_timeout_seconds;

TEST_CASE("a connect_timeout in seconds is the limit, at least 2", "[connect_timeout]") {
    CHECK(connect_timeout_seconds("60") == 60L);
    CHECK(connect_timeout_seconds(" 7 ") == 7L);
    CHECK(connect_timeout_seconds("1") == 2L);
}

TEST_CASE("no connect_timeout, 0 or a negative one means no limit", "[connect_timeout]") {
    CHECK_FALSE(connect_timeout_seconds(nullptr).has_value());
    CHECK_FALSE(connect_timeout_seconds("0").has_value());
    CHECK_FALSE(connect_timeout_seconds("-5").has_value());
}

TEST_CASE("text libpq would refuse gives no limit of ours", "[connect_timeout]") {
    CHECK_FALSE(connect_timeout_seconds("").has_value());
    CHECK_FALSE(connect_timeout_seconds("10s").has_value());
    CHECK_FALSE(connect_timeout_seconds("99999999999").has_value());
}
