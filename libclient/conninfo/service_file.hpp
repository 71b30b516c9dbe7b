// with_rsocket in pg_service.conf, read by libpq 15's rules (fe-connect.c
// parseServiceInfo / parseServiceFile, confirmed against libpq.so.5 15.20):
//   - the service is the connection's `service` or else PGSERVICE;
//   - the user file is PGSERVICEFILE when set (no existence check: libpq
//     fails when it cannot open it), else ~/.pg_service.conf when it exists,
//     ~ being HOME when set and non-empty, else the passwd entry's home;
//   - when the user file has no section for the service, the system file
//     (PGSYSCONFDIR, else libpq's compiled sysconfdir)/pg_service.conf,
//     when it exists; the first file with the section is the only one read;
//   - a line is stripped of surrounding whitespace; empty lines and lines
//     starting with '#' are skipped; "[name]" starts a section (a line
//     starting with "[" + name + "]" matches, the rest of it is ignored);
//   - in the section, key=value splits at the first '=' with nothing else
//     trimmed, and the first line for a keyword wins.
// libpq rejects a keyword it does not know in the section it reads, so the
// client library hides our lines from it (without_keyword_lines) and reads
// them here. Not followed: an "ldap..." line, after which libpq reads the
// rest of the section only when the LDAP lookup is unavailable; our line
// counts either way.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pg_rdma::conninfo {

struct ServiceEnvironment {
    std::optional<std::string> service_file;  // PGSERVICEFILE
    std::optional<std::string> home;          // the home directory, when one is known
    std::optional<std::string> sysconf_dir;   // PGSYSCONFDIR
};

// The process's own: getenv and the passwd entry of the effective user.
ServiceEnvironment current_service_environment();

struct ServiceFiles {
    std::optional<std::string> user;  // absent: no home and no PGSERVICEFILE
    bool user_must_exist = false;     // PGSERVICEFILE: libpq opens it unchecked
    std::string system;
};

ServiceFiles service_files(const ServiceEnvironment& env);

struct SectionLookup {
    bool section_found = false;
    std::optional<std::string> value;  // the section's first with_rsocket line
};

SectionLookup find_in_service_text(std::string_view text, std::string_view service);

// The text with every line whose key is with_rsocket turned into a comment
// of the same length (so libpq's line numbers and length limit are kept);
// nullopt when there is none.
std::optional<std::string> without_keyword_lines(std::string_view text);

// The with_rsocket value the service's section gives, following libpq's
// choice of file. `read_file` returns a file's contents, nullopt when it
// does not exist or cannot be read.
using FileReader = std::function<std::optional<std::string>(const std::string&)>;
std::optional<std::string> service_value(std::string_view service, const ServiceEnvironment& env,
                                         const FileReader& read_file);

}  // namespace pg_rdma::conninfo
