#include "server_ext/session/output_batching.hpp"

#include <cerrno>

#include "server_ext/session/backend_session.hpp"
#include "server_ext/settings_gucs.hpp"

#include "server_ext/pg_headers.hpp"

extern "C" {
#include "libpq/libpq.h"
}

namespace pg_rdma::server {
namespace {

const PQcommMethods* socket_methods = nullptr;  // PostgreSQL's, saved at install
bool in_putmessage = false;

// A flush means the client may wait for what was sent: nothing stays held.
// True when some bytes still are: they wait for the client's credits.
bool send_held() {
    BackendSession& s = backend_session();
    if (s.phase != SessionPhase::Rdma || !s.rdma) return false;
    bool still_held = false;
    const int saved_errno = errno;  // PostgreSQL's callers may still read it
    // Counters only when something went: a flush normally finds nothing
    // held (its own send ended the hold), once per query.
    if (s.rdma->send_held(&still_held)) publish_counters();
    errno = saved_errno;
    return still_held;
}

// No C++ object lives in these frames, so an ereport(ERROR) longjmp out of
// PostgreSQL's putmessage is harmless: it would leave in_putmessage set
// until the next putmessage returns or pq_comm_reset() (error recovery)
// clears it, and a send made meanwhile is still sent by the flush, read or
// wait that follows it. The outer value is restored, not cleared: a
// handler's putmessage may interrupt another (quickdie's).
int putmessage(char msgtype, const char* s, size_t len) {
    const bool outer = in_putmessage;
    in_putmessage = true;
    const int rc = socket_methods->putmessage(msgtype, s, len);
    in_putmessage = outer;
    return rc;
}

void comm_reset() {
    in_putmessage = false;
    socket_methods->comm_reset();
}

int flush() {
    const int rc = socket_methods->flush();
    (void)send_held();
    return rc;
}
int flush_if_writable() {
    const int rc = socket_methods->flush_if_writable();
    (void)send_held();
    return rc;
}
// Held bytes are pending too: a walsender that is told nothing is pending
// stops waiting for the socket to become writable, and a hold that waits
// for credits would then wait for the walsender's next message.
bool is_send_pending() { return socket_methods->is_send_pending() || send_held(); }
void putmessage_noblock(char msgtype, const char* s, size_t len) {
    socket_methods->putmessage_noblock(msgtype, s, len);
}

const PQcommMethods batching_methods = {comm_reset, flush, flush_if_writable, is_send_pending, putmessage,
                                        putmessage_noblock};

}  // namespace

void install_output_batching() noexcept {
    if (PqCommMethods == &batching_methods || PqCommMethods == nullptr) return;
    socket_methods = PqCommMethods;
    PqCommMethods = &batching_methods;
}

bool output_buffer_full() noexcept { return in_putmessage && output_batching_guc(); }

}  // namespace pg_rdma::server
