#include "server_ext/session/row_claim.hpp"

#include "server_ext/session/backend_session.hpp"
#include "server_ext/setup_gate.hpp"

#include "server_ext/pg_headers.hpp"

extern "C" {
#include "libpq/auth.h"
}

namespace pg_rdma::server {
namespace {

ClientAuthentication_hook_type previous_hook = nullptr;

// Runs in the backend after the authentication exchange, before
// PostgreSQL reports its outcome. A failed one gets no row: its FATAL
// follows at once.
void on_client_authenticated(Port* port, int status) {
    // Authenticated or about to be refused: either way no longer a
    // stranger holding RDMA resources (given back before a previous hook
    // such as auth_delay makes a failed login wait).
    leave_setup_gate();
    if (previous_hook != nullptr) previous_hook(port, status);
    // The role by its Oid, as pg_stat_activity keeps it: a rename, or a
    // new role under an old name, changes nothing of who may see the row.
    // Inside InitPostgres's startup transaction: the catalog is readable.
    if (status == STATUS_OK)
        claim_pending_row(port->user_name != nullptr ? get_role_oid(port->user_name, true) : InvalidOid);
}

}  // namespace

void install_row_claim_hook() {
    previous_hook = ClientAuthentication_hook;
    ClientAuthentication_hook = on_client_authenticated;
}

}  // namespace pg_rdma::server
