#include "server_ext/session/hba_precheck.hpp"

#include <sys/stat.h>

#include <cstring>

#include "server_ext/pg_headers.hpp"
#include "server_ext/pg_compat.hpp"

extern "C" {
#include "libpq/ifaddr.h"
#include "utils/memutils.h"
}

namespace pg_rdma::server {
namespace {

// Messages about the file go no further than this: PostgreSQL reports a
// bad pg_hba.conf itself, at reload.
constexpr int kFileMessageLevel = DEBUG1;
constexpr long kNanosPerMicro = 1000;

enum class Match { No, Maybe, Always };

// Could `line`'s address field match `client`, and does it for sure?
Match address_match(const HbaLine& line, const sockaddr_storage& client) {
    switch (line.ip_cmp_method) {
        case ipCmpAll: return Match::Always;
        case ipCmpMask:
            // A host name needs DNS, which a stranger's address must not
            // make this server do early: PostgreSQL decides.
            if (line.hostname != nullptr) return Match::Maybe;
            if (line.addr.ss_family != client.ss_family) return Match::No;
            return pg_range_sockaddr(&client, &line.addr, &line.mask) ? Match::Always : Match::No;
        case ipCmpSameHost:
        case ipCmpSameNet: return Match::Maybe;  // this server's interfaces: PostgreSQL decides
    }
    return Match::Maybe;
}

bool is_keyword(const AuthToken* token, const char* keyword) {
    return !token->quoted && std::strcmp(token->string, keyword) == 0;
}

bool has_keyword(List* tokens, const char* keyword) {
    ListCell* cell = nullptr;
    foreach (cell, tokens)
        if (is_keyword(static_cast<const AuthToken*>(lfirst(cell)), keyword)) return true;
    return false;
}

// The kinds of connection a line's database field can match: "replication"
// matches physical replication connections only, every other entry ("all"
// included) ordinary ones only.
constexpr unsigned kOrdinary = 1;
constexpr unsigned kReplication = 2;

unsigned kinds_of(List* databases) {
    unsigned kinds = 0;
    ListCell* cell = nullptr;
    foreach (cell, databases)
        kinds |= is_keyword(static_cast<const AuthToken*>(lfirst(cell)), "replication") ? kReplication : kOrdinary;
    return kinds;
}

// Whether the file as it is on disk is what PostgreSQL loaded: not changed
// since the last reload (PgReloadTime is set just before the postmaster
// reads it), and no text from other files, whose times are not looked at.
bool unchanged_since_reload(const char* path) {
    struct stat st {};
    if (stat(path, &st) != 0) return false;
    const TimestampTz modified = time_t_to_timestamptz(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec / kNanosPerMicro;
    return modified < PgReloadTime;
}

// A radius line makes PostgreSQL's parser resolve the RADIUS servers' names
// (DNS) on every parse: not for every stranger's upgrade request.
bool names_radius(const TokenizedAuthLine* line) {
    ListCell* field = nullptr;
    foreach (field, line->fields) {
        ListCell* cell = nullptr;
        foreach (cell, static_cast<List*>(lfirst(field)))
            if (is_keyword(static_cast<const AuthToken*>(lfirst(cell)), "radius")) return true;
    }
    return false;
}

// Parses every line, as PostgreSQL loads the file: all or nothing. NIL in
// `parsed` when the file would not load, or cannot be judged here.
List* parse_all(List* tokenized) {
    List* parsed = NIL;
    ListCell* cell = nullptr;
    foreach (cell, tokenized) {
        auto* tok_line = static_cast<TokenizedAuthLine*>(lfirst(cell));
        if (tok_line->err_msg != nullptr || compat::auth_line_from_other_file(tok_line, HbaFileName) ||
            names_radius(tok_line))
            return NIL;
        HbaLine* line = parse_hba_line(tok_line, kFileMessageLevel);
        if (line == nullptr) return NIL;
        parsed = lappend(parsed, line);
    }
    return parsed;  // NIL for a file without entries, which PostgreSQL does not load either
}

// The verdict over the loaded lines, as check_hba() would go through them
// for every database and role the client might name.
HbaPrecheck judge(List* lines, const sockaddr_storage& client) {
    HbaPrecheck verdict;
    unsigned open = kOrdinary | kReplication;  // kinds no reject line has stopped yet
    ListCell* cell = nullptr;
    foreach (cell, lines) {
        const auto* line = static_cast<const HbaLine*>(lfirst(cell));
        if (line->conntype == ctLocal) continue;
        const Match address = address_match(*line, client);
        if (address == Match::No) continue;
        const unsigned kinds = kinds_of(line->databases) & open;
        if (kinds == 0) continue;
        if (line->auth_method != uaReject) return verdict;  // it could admit someone
        // A reject line stops what it matches for sure: every connection
        // of its kinds from this address, whatever the role, TLS or GSS.
        if (line->conntype == ctHost && address == Match::Always && has_keyword(line->roles, "all")) {
            if (has_keyword(line->databases, "all")) open &= ~kOrdinary;
            if (has_keyword(line->databases, "replication")) open &= ~kReplication;
            if (open == 0) {
                verdict.could_admit = false;
                verdict.line = line->linenumber;
                return verdict;
            }
        }
    }
    // Past the last line: PostgreSQL's implicit reject.
    verdict.could_admit = false;
    verdict.line = 0;
    return verdict;
}

}  // namespace

HbaPrecheck precheck_hba(const sockaddr_storage& client) noexcept {
    HbaPrecheck out;  // "could admit" unless the file says otherwise
    if (!unchanged_since_reload(HbaFileName)) return out;
    // C-style from here: an ERROR from PostgreSQL's code longjmps back to
    // PG_CATCH below, and no frame in between holds a C++ object. Nothing
    // goes to the client meanwhile: it waits for the one-byte answer.
    // Statics, not locals: PG_CATCH must see them as the try left them,
    // which locals changed after sigsetjmp() are not promised to be.
    static compat::AuthFileReading reading;
    static MemoryContext scratch;
    static HbaPrecheck result;
    reading = compat::AuthFileReading{};
    scratch = nullptr;
    result = HbaPrecheck{};
    MemoryContext const caller = CurrentMemoryContext;
    const CommandDest dest = whereToSendOutput;
    whereToSendOutput = DestNone;
    PG_TRY();
    {
        scratch = AllocSetContextCreate(caller, "pg_rdma hba precheck", ALLOCSET_SMALL_SIZES);
        MemoryContextSwitchTo(scratch);
        List* tokenized = NIL;
        if (compat::read_auth_file(HbaFileName, kFileMessageLevel, &tokenized, reading)) {
            List* const lines = parse_all(tokenized);
            if (lines != NIL) result = judge(lines, client);
        }
        compat::end_reading_auth_file(reading);
    }
    PG_CATCH();
    {
        // Out of memory or the like: PostgreSQL decides, as without us. A
        // file an @-include had open at that moment stays open until the
        // backend exits (fd.c closes it then).
        MemoryContextSwitchTo(caller);
        FlushErrorState();
        compat::end_reading_auth_file(reading);
        result = HbaPrecheck{};
    }
    PG_END_TRY();
    whereToSendOutput = dest;
    MemoryContextSwitchTo(caller);
    if (scratch != nullptr) MemoryContextDelete(scratch);
    out = result;
    return out;
}

}  // namespace pg_rdma::server
