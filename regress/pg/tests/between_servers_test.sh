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

# 3. Streaming replication. The standby is a pg_basebackup -R over RDMA of
# the primary (primary_conninfo keeps with_rsocket=true), with pg_rdma
# preloaded; its walreceiver streams over RDMA.
pg_cluster_use "$primary"
psql_primary -c "create table rep (id int primary key, v text)" >/dev/null
standby=$(mktemp -d /tmp/pg_rdma-standby.XXXXXX)
PG_CLUSTER_PORT=54431
pg_cluster_init "$standby" "$build"
as_pg rm -rf "$PG_CLUSTER_DATA"
pg_cluster_use "$primary"
pg_cluster_client env LD_PRELOAD=$so "$PG_CLUSTER_BIN/pg_basebackup" -d "user=postgres with_rsocket=true" \
    -D "$standby/data" -R -X fetch -c fast 2>"$standby/err" || fail "pg_basebackup of the primary: $(cat "$standby/err")"
grep -q "^primary_conninfo = '.*with_rsocket=true" "$standby/data/postgresql.auto.conf" ||
    fail "the standby's primary_conninfo lost with_rsocket: $(grep primary_conninfo "$standby/data/postgresql.auto.conf")"
# The copied postgresql.conf is the primary's: the standby's own port and
# socket directory come last (later lines win).
printf "port = 54431\nunix_socket_directories = '%s'\n" "$standby" | as_pg tee -a "$standby/data/postgresql.conf" >/dev/null
pg_cluster_use "$standby"
pg_cluster_start
psql_standby() { pg_cluster_use "$standby"; pg_cluster_psql "$@"; }
walsender_transport() {
    psql_primary -c "select r.transport from pg_stat_replication s join pg_stat_rdma r using (pid)
                      where s.state = 'streaming'"
}
streaming_over_rdma() { [ "$(walsender_transport)" = rdma ]; }
wait_for 60 streaming_over_rdma || fail "the walsender is not streaming over rdma: '$(walsender_transport)'"
psql_primary -c "insert into rep select g, md5(g::text) from generate_series(1, 1000) g" >/dev/null
replayed() { [ "$(psql_standby -c "select count(*) from rep" 2>/dev/null)" = "$1" ]; }
wait_for 60 replayed 1000 || fail "the standby did not replay the rows: $(psql_standby -c 'select count(*) from rep' 2>&1)"
echo "ok: streaming replication over RDMA (walsender on rdma, pg_stat_replication streaming, rows on the standby)"

# The primary restarts mid-stream: the walreceiver reconnects over RDMA by itself.
pg_cluster_use "$primary"
pg_cluster_restart
wait_for 90 streaming_over_rdma || fail "after the primary's restart the standby did not stream over rdma again: '$(walsender_transport)'"
psql_primary -c "insert into rep select g, md5(g::text) from generate_series(1001, 2000) g" >/dev/null
wait_for 60 replayed 2000 || fail "after the restart the standby did not replay the new rows"
echo "ok: after a primary restart the standby reconnected over RDMA and replays"

# 4. Logical replication: a subscriber cluster's apply (and tablesync)
# workers connect with the subscription's with_rsocket=true.
psql_primary -c "create table pub_t (id int primary key, v text)" \
    -c "insert into pub_t select g, 'x' || g from generate_series(1, 500) g" \
    -c "create publication pub for table pub_t" >/dev/null
subscriber=$(mktemp -d /tmp/pg_rdma-subscriber.XXXXXX)
PG_CLUSTER_PORT=54432
pg_cluster_init "$subscriber" "$build"
pg_cluster_start
psql_sub() { pg_cluster_use "$subscriber"; pg_cluster_psql "$@"; }
psql_sub -c "create table pub_t (id int primary key, v text)" \
    -c "create subscription sub connection '$remote with_rsocket=true' publication pub" >/dev/null 2>&1 ||
    fail "create subscription: $(psql_sub -c 'select 1' 2>&1)"
sub_transport() {
    psql_primary -c "select r.transport from pg_stat_replication s join pg_stat_rdma r using (pid)
                      where s.application_name = 'sub'"
}
sub_over_rdma() { [ "$(sub_transport)" = rdma ]; }
wait_for 90 sub_over_rdma || fail "the subscription's walsender is not on rdma: '$(sub_transport)'"
copied() { [ "$(psql_sub -c "select count(*) from pub_t" 2>/dev/null)" = "$1" ]; }
wait_for 90 copied 500 || fail "the initial copy did not arrive: $(psql_sub -c 'select count(*) from pub_t' 2>&1)"
psql_primary -c "insert into pub_t select g, 'y' || g from generate_series(501, 600) g" >/dev/null
wait_for 60 copied 600 || fail "rows inserted after the copy did not replicate"
echo "ok: logical replication over RDMA (the subscription's walsender on rdma, initial copy and new rows)"

for l in "$plog" "$(pg_cluster_use "$standby"; pg_cluster_log)" "$(pg_cluster_use "$subscriber"; pg_cluster_log)"; do
    ! grep -q 'server process .* was terminated' "$l" || fail "a server process crashed ($l)"
done
echo "ok: no server process crashed"
