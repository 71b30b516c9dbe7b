#include "libclient/proxy/refusal.hpp"

#include "protocol/byte_order.hpp"
#include "protocol/session_opener.hpp"

namespace pg_rdma::proxy {
namespace {

void add_field(std::vector<std::uint8_t>& out, char code, std::string_view value)
{
    if (value.empty())
        return;
    out.push_back(static_cast<std::uint8_t>(code));
    out.insert(out.end(), value.begin(), value.end());
    out.push_back(0);
}

}  // namespace

std::vector<std::uint8_t> error_response(const Refusal& refusal)
{
    std::vector<std::uint8_t> out{'E', 0, 0, 0, 0};
    add_field(out, 'S', "FATAL");
    add_field(out, 'V', "FATAL");  // the untranslated severity (protocol 3 since 9.6)
    add_field(out, 'C', refusal.sqlstate);
    add_field(out, 'M', refusal.message);
    add_field(out, 'D', refusal.detail);
    add_field(out, 'H', refusal.hint);
    out.push_back(0);
    // The length counts itself, not the type byte.
    protocol::put_u32(out.data() + 1, static_cast<std::uint32_t>(out.size() - 1));
    return out;
}

bool answers_in_clear(std::span<const std::uint8_t> first_bytes) noexcept
{
    switch (protocol::classify_opener(first_bytes)) {
    case protocol::Opener::Startup:
    case protocol::Opener::SslRequest:
    case protocol::Opener::GssEncRequest:
        return true;
    case protocol::Opener::DirectSsl:
    case protocol::Opener::None:
        return false;
    }
    return false;
}

}  // namespace pg_rdma::proxy
