// pg_service.conf, libpq's way (service_file.hpp).
#include "libclient/conninfo/service_file.hpp"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "libclient/conninfo/policy.hpp"

#ifndef PG_RDMA_LIBPQ_SYSCONFDIR
#error "PG_RDMA_LIBPQ_SYSCONFDIR (pg_config --sysconfdir) must be defined by the build"
#endif

namespace pg_rdma::conninfo {
namespace {

// libpq's isspace() in the C locale.
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string_view trimmed(std::string_view line) {
    while (!line.empty() && is_space(line.back())) line.remove_suffix(1);
    while (!line.empty() && is_space(line.front())) line.remove_prefix(1);
    return line;
}

// Calls `each(line, offset of line in text)` for every line, newline excluded.
template <typename Each>
void for_each_line(std::string_view text, Each&& each) {
    std::size_t start = 0;
    while (start < text.size()) {
        std::size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        if (!each(text.substr(start, end - start), start)) return;
        start = end + 1;
    }
}

bool is_our_line(std::string_view line) {
    const std::size_t eq = line.find('=');
    return eq != std::string_view::npos && line.substr(0, eq) == kKeyword;
}

std::optional<std::string> getenv_value(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr ? std::optional<std::string>(v) : std::nullopt;
}

}  // namespace

ServiceEnvironment current_service_environment() {
    ServiceEnvironment env;
    env.service_file = getenv_value("PGSERVICEFILE");
    env.sysconf_dir = getenv_value("PGSYSCONFDIR");
    if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0') {
        env.home = home;
    } else {
        std::vector<char> buf(16384);
        passwd entry{};
        passwd* found = nullptr;
        if (getpwuid_r(geteuid(), &entry, buf.data(), buf.size(), &found) == 0 && found != nullptr)
            env.home = found->pw_dir;
    }
    return env;
}

ServiceFiles service_files(const ServiceEnvironment& env) {
    ServiceFiles files;
    if (env.service_file) {
        files.user = *env.service_file;
        files.user_must_exist = true;
    } else if (env.home) {
        files.user = *env.home + "/.pg_service.conf";
    }
    files.system = env.sysconf_dir.value_or(PG_RDMA_LIBPQ_SYSCONFDIR) + "/pg_service.conf";
    return files;
}

SectionLookup find_in_service_text(std::string_view text, std::string_view service) {
    SectionLookup found;
    bool in_section = false;
    for_each_line(text, [&](std::string_view raw, std::size_t) {
        const std::string_view line = trimmed(raw);
        if (line.empty() || line.front() == '#') return true;
        if (line.front() == '[') {
            if (in_section) return false;  // libpq stops at the section's end
            in_section = line.size() > service.size() + 1 && line.substr(1, service.size()) == service &&
                         line[service.size() + 1] == ']';
            found.section_found = found.section_found || in_section;
            return true;
        }
        if (in_section && !found.value && is_our_line(line)) found.value = std::string(line.substr(line.find('=') + 1));
        return true;
    });
    return found;
}

std::optional<std::string> without_keyword_lines(std::string_view text) {
    std::string out(text);
    bool changed = false;
    for_each_line(text, [&](std::string_view raw, std::size_t offset) {
        const std::string_view line = trimmed(raw);
        if (is_our_line(line)) {
            out[offset + static_cast<std::size_t>(line.data() - raw.data())] = '#';
            changed = true;
        }
        return true;
    });
    return changed ? std::optional<std::string>(std::move(out)) : std::nullopt;
}

std::optional<std::string> service_value(std::string_view service, const ServiceEnvironment& env,
                                         const FileReader& read_file) {
    const ServiceFiles files = service_files(env);
    if (files.user) {
        if (const auto text = read_file(*files.user)) {
            const SectionLookup user = find_in_service_text(*text, service);
            if (user.section_found) return user.value;
        } else if (files.user_must_exist) {
            return std::nullopt;  // libpq fails: "service file ... not found"
        }
    }
    if (const auto text = read_file(files.system)) return find_in_service_text(*text, service).value;
    return std::nullopt;
}

}  // namespace pg_rdma::conninfo
