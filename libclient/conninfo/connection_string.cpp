// Dispatch between the URI and keyword/value forms, as libpq does.
#include "libclient/conninfo/connection_string.hpp"

#include "libclient/conninfo/keyword_value.hpp"
#include "libclient/conninfo/uri.hpp"

namespace pg_rdma::conninfo {

bool is_uri(std::string_view conninfo) {
    return uri_prefix_length(conninfo) != 0;
}

bool is_recognized_connection_string(std::string_view conninfo) {
    conninfo = conninfo.substr(0, conninfo.find('\0'));
    return is_uri(conninfo) || conninfo.find('=') != std::string_view::npos;
}

Extraction extract_from_connection_string(std::string_view conninfo) {
    return is_uri(conninfo) ? extract_from_uri(conninfo) : extract_from_keyword_value(conninfo);
}

}  // namespace pg_rdma::conninfo
