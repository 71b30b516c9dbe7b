# shellcheck shell=bash
# regress/pg/session_test_lib.sh — sourced by the session tests after their
# cluster is started (sessions_test.sh, session_basics_test.sh): the
# helpers each of them had written out alike. Needs $pgrdma.
#   fail MSG                 the test fails, with the server log's tail
#   client CMD...            CMD through pgrdma as role PGUSER (default app)
#   rpsql CONNINFO ARGS...   psql over RDMA (with_rsocket=require)
#   postmaster_unchanged     fails if the postmaster restarted since sourcing
#   $me                      SQL: this session's transport in pg_stat_rdma
log=$(pg_cluster_log)
work=$PG_CLUSTER_WORK
started=$(pg_cluster_psql -c 'select pg_postmaster_start_time()')
me="select transport from pg_stat_rdma where pid = pg_backend_pid()"

fail() { echo "FAIL: $*"; echo "--- server log (tail):"; tail -40 "$log"; exit 1; }
client() { PGUSER=${PGUSER:-app} pg_cluster_client "$pgrdma" "$@"; }
rpsql() { local conninfo=$1; shift; client psql -X -At -v ON_ERROR_STOP=1 -d "dbname=postgres with_rsocket=require $conninfo" "$@"; }
postmaster_unchanged() {
    [ "$(pg_cluster_psql -c 'select pg_postmaster_start_time()')" = "$started" ] || fail "the postmaster restarted"
}
