#!/usr/bin/env bash
# The libpq connections PostgreSQL servers make themselves, over RDMA, in the
# Soft-RoCE guest against real PostgreSQL 15 clusters with the built pg_rdma
# (pg_rdma.client_library = the built libpq_rdma.so, set by cluster.sh):
# dblink and postgres_fdw (a backend's own libpq), streaming replication (the
# walreceiver; a primary restart mid-stream), logical replication (the
# apply and tablesync workers). Which transport a connection used is what
# the server it reached says (pg_stat_rdma).
# Usage: between_servers_test.sh BUILD_DIR
set -euo pipefail
build=$1
IP=${RXE_IP:?run in the Soft-RoCE guest}
# shellcheck source=regress/pg/cluster.sh
. "$(dirname "$(readlink -f "$0")")/../cluster.sh"
so=$build/libclient/preload/libpq_rdma.so

wait_for() {  # wait_for SECONDS CMD...: until CMD succeeds, SECONDS of wall time
    local until=$((SECONDS + $1)); shift
    while [ "$SECONDS" -lt "$until" ]; do "$@" && return 0; sleep 0.2; done
    "$@"
}

# The primary, which is also the publisher and the remote end of dblink/fdw.
PG_CLUSTER_PORT=54430
pg_cluster_init "$(mktemp -d /tmp/pg_rdma-primary.XXXXXX)" "$build" \
    "wal_level = logical" "log_connections = on" "log_replication_commands = on"
pg_cluster_start
pg_cluster_set_password postgres secret
primary=$PG_CLUSTER_WORK
plog=$(pg_cluster_log)
fail() { echo "FAIL: $*"; echo "--- primary log (tail):"; tail -30 "$plog"; exit 1; }
pg_cluster_psql -c 'create extension pg_rdma' -c 'create extension dblink' -c 'create extension postgres_fdw' \
    -c "create view my_transport as select transport from pg_stat_rdma where pid = pg_backend_pid()" >/dev/null
remote="host=$IP port=$PG_CLUSTER_PORT user=postgres password=secret dbname=postgres"
psql_primary() { pg_cluster_use "$primary"; pg_cluster_psql "$@"; }

# 1. dblink: a backend's own libpq connection asks for RDMA in its string.
for case in "with_rsocket=require:rdma" "with_rsocket=true:rdma" "with_rsocket=false:tcp" ":tcp"; do
    value=${case%:*} want=${case##*:}
    got=$(psql_primary -c "select t from dblink('$remote $value', 'select transport from my_transport') as r(t text)") ||
        fail "dblink '$value': $got"
    [ "$got" = "$want" ] || fail "dblink '$value': the remote session is on '$got', want $want"
done
out=$(psql_primary -c "select * from dblink('$remote with_rsocket=maybe', 'select 1') as r(i int)" 2>&1) &&
    fail "dblink accepted with_rsocket=maybe"
grep -q 'invalid with_rsocket value: "maybe"' <<<"$out" || fail "dblink maybe: $out"
echo "ok: dblink connection strings honour with_rsocket (require, true, false, absent; maybe rejected)"

# 2. postgres_fdw: the option validator accepts with_rsocket, the remote
# session runs over RDMA; the local psql session (Unix socket) is untouched.
psql_primary >/dev/null <<SQL
create server rdma_srv foreign data wrapper postgres_fdw
  options (host '$IP', port '$PG_CLUSTER_PORT', dbname 'postgres', with_rsocket 'true');
create user mapping for postgres server rdma_srv options (user 'postgres', password 'secret');
create foreign table remote_transport (transport text) server rdma_srv options (table_name 'my_transport');
SQL
got=$(psql_primary -c "select transport from remote_transport") || fail "postgres_fdw: $got"
[ "$got" = rdma ] || fail "postgres_fdw: the remote session is on '$got'"
out=$(psql_primary -c "create server bad_srv foreign data wrapper postgres_fdw options (with_rsockets 'true')" 2>&1) &&
    fail "postgres_fdw accepted a misspelt option"
echo "ok: postgres_fdw server option with_rsocket 'true': the remote session is on rdma"
