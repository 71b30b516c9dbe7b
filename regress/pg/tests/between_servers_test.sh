#!/usr/bin/env bash
# The libpq connections PostgreSQL servers make themselves, over RDMA, in the
# Soft-RoCE guest against real PostgreSQL 15 clusters with the built pg_rdma
# (pg_rdma.client_library = the built libpq_rdma.so, set by cluster.sh):
# dblink and postgres_fdw (a backend's own libpq), streaming replication (the
# walreceiver; a primary restart mid-stream), logical replication (the
# apply and tablesync workers). Which transport a connection used is what
# the server it reached says (pg_stat_rdma); the server that made it lists
# it in pg_stat_rdma_outgoing (dblink's, the walreceiver's).
# Usage: between_servers_test.sh BUILD_DIR
set -euo pipefail
build=$1
IP=${RXE_IP:?run in the Soft-RoCE guest}
# shellcheck source=regress/pg/cluster.sh
. "$(dirname "$(readlink -f "$0")")/../cluster.sh"
so=$build/libclient/preload/libpq_rdma.so
conf=$PG_RDMA_ROOT/conf  # the samples this test uses as they are

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

# A backend whose own client session is on RDMA, using dblink over RDMA too.
both=$(pg_cluster_client env LD_PRELOAD="$so" "$PG_CLUSTER_BIN/psql" -X -At -v ON_ERROR_STOP=1 \
    -d "dbname=postgres with_rsocket=require" \
    -c "select (select transport from my_transport) || ' ' ||
               (select t from dblink('$remote with_rsocket=require', 'select transport from my_transport') as r(t text))") ||
    fail "dblink from an RDMA session: $both"
[ "$both" = "rdma rdma" ] || fail "dblink from an RDMA session: own and remote transports '$both'"
# Two named connections with queries in flight at once: each result waited
# for in its own short-lived wait set (epoll descriptors reused).
out=$(psql_primary <<SQL
select dblink_connect('a', '$remote with_rsocket=require');
select dblink_connect('b', '$remote with_rsocket=require');
select dblink_send_query('a', 'select pg_sleep(0.5), transport from my_transport');
select dblink_send_query('b', 'select pg_sleep(0.2), transport from my_transport');
select t from dblink_get_result('b') as r(s text, t text);
select t from dblink_get_result('a') as r(s text, t text);
select dblink_disconnect('a'), dblink_disconnect('b');
SQL
) || fail "two dblink connections: $out"
[ "$(grep -cx rdma <<<"$out")" = 2 ] || fail "two dblink connections in flight: $out"
echo "ok: dblink from a backend whose own session is on RDMA; two named connections in flight at once"

# The connecting server's own view: a row per connection its backend made,
# with the address it reached, the transport and what was asked; gone at
# disconnect.
out=$(psql_primary <<SQL
select dblink_connect('o1', '$remote with_rsocket=require');
select dblink_connect('o2', '$remote with_rsocket=false');
select transport || ' ' || host(remote_addr) || ' ' || remote_port || ' ' || coalesce(device, '-') || ' ' ||
       coalesce(requested, '-') || ' ' || (connected_at <= now())
from pg_stat_rdma_outgoing where pid = pg_backend_pid() order by transport;
select 'rows ' || count(*) from pg_stat_rdma_outgoing where pid = pg_backend_pid();
select dblink_disconnect('o1'), dblink_disconnect('o2');
select 'left ' || count(*) from pg_stat_rdma_outgoing where pid = pg_backend_pid();
SQL
) || fail "pg_stat_rdma_outgoing with two dblink connections: $out"
grep -qx "rdma $IP $PG_CLUSTER_PORT rxe0 require true" <<<"$out" || fail "no outgoing rdma row for dblink o1: $out"
grep -qx "tcp $IP $PG_CLUSTER_PORT - false true" <<<"$out" || fail "no outgoing tcp row for dblink o2: $out"
grep -qx "rows 2" <<<"$out" || fail "two dblink connections do not make exactly two rows: $out"
grep -qx "left 0" <<<"$out" || fail "dblink_disconnect left outgoing rows: $out"
# An ordinary role, logged in as itself, sees its own connections' details;
# its backend's rows go when it exits without disconnecting.
psql_primary -c "create role outgoing_reader login" -c "grant execute on function dblink_connect_u(text, text) to outgoing_reader" >/dev/null
out=$(as_pg "$PG_CLUSTER_BIN/psql" -X -At -v ON_ERROR_STOP=1 -h "$primary" -p "$PG_CLUSTER_PORT" -U outgoing_reader -d postgres <<SQL
select dblink_connect_u('o3', '$remote with_rsocket=require');
select 'own ' || transport || ' ' || pg_backend_pid() from pg_stat_rdma_outgoing where pid = pg_backend_pid();
SQL
) || fail "pg_stat_rdma_outgoing for an ordinary role: $out"
grep -q "^own rdma [0-9]*$" <<<"$out" || fail "an ordinary role does not see its own outgoing row: $out"
reader_pid=$(sed -n 's/^own rdma //p' <<<"$out")
reader_rows_gone() { [ "$(psql_primary -c "select count(*) from pg_stat_rdma_outgoing where pid = $reader_pid")" = 0 ]; }
wait_for 30 reader_rows_gone || fail "the outgoing row of an exited backend ($reader_pid) stayed"
echo "ok: pg_stat_rdma_outgoing lists a backend's dblink connections (rdma with rxe0 and require, tcp with false; exactly two), drops them at disconnect and at backend exit, shows a role its own"

# 2. postgres_fdw: the option validator accepts with_rsocket, the remote
# session runs over RDMA; the local psql session (Unix socket) is untouched.
psql_primary -v remote="$IP" -v port="$PG_CLUSTER_PORT" -v password=secret -f "$conf/postgres_fdw.pg_rdma.sql" \
    >/dev/null || fail "conf/postgres_fdw.pg_rdma.sql"
psql_primary -c "create foreign table remote_transport (transport text) server rdma_remote
                 options (table_name 'my_transport')" >/dev/null
got=$(psql_primary -c "select transport from remote_transport") || fail "postgres_fdw: $got"
[ "$got" = rdma ] || fail "postgres_fdw: the remote session is on '$got'"
got=$(psql_primary -c "select count(*) from remote_transport" \
    -c "select transport || ' ' || requested from pg_stat_rdma_outgoing where pid = pg_backend_pid()") ||
    fail "postgres_fdw's outgoing row: $got"
[ "$(tail -1 <<<"$got")" = "rdma true" ] || fail "postgres_fdw's connection in pg_stat_rdma_outgoing: '$got'"
echo "ok: postgres_fdw server (conf/postgres_fdw.pg_rdma.sql) with with_rsocket 'true': the remote session is on rdma (and listed in pg_stat_rdma_outgoing)"

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
    -D "$standby/data" -R -c fast 2>"$standby/err" || fail "pg_basebackup of the primary: $(cat "$standby/err")"
grep -q "^primary_conninfo = '.*with_rsocket=true" "$standby/data/postgresql.auto.conf" ||
    fail "the standby's primary_conninfo lost with_rsocket: $(grep primary_conninfo "$standby/data/postgresql.auto.conf")"
# The standby streams with conf/standby.pg_rdma.conf's primary_conninfo
# (the -R one, checked above, is taken out), aimed at this primary, the
# password from the primary's password file. The copied postgresql.conf is
# the primary's: the standby's own port and socket directory come last.
as_pg sed -i '/^primary_conninfo/d' "$standby/data/postgresql.auto.conf"
sed -e "s|port=5432|port=54430|" -e "s|host=10.99.0.1|host=$IP|" \
    -e "s|with_rsocket=true|with_rsocket=true passfile=$primary/pgpass|" "$conf/standby.pg_rdma.conf" |
    as_pg tee -a "$standby/data/postgresql.conf" >/dev/null
printf "port = 54431\nunix_socket_directories = '%s'\n" "$standby" | as_pg tee -a "$standby/data/postgresql.conf" >/dev/null
pg_cluster_use "$standby"
pg_cluster_start
psql_standby() { pg_cluster_use "$standby"; pg_cluster_psql "$@"; }
walsender_transport() {
    psql_primary -c "select r.transport from pg_stat_replication s join pg_stat_rdma r using (pid)
                      where s.state = 'streaming' and s.application_name = 'standby1'"
}
streaming_over_rdma() { [ "$(walsender_transport)" = rdma ]; }
wait_for 60 streaming_over_rdma || fail "the walsender is not streaming over rdma: '$(walsender_transport)'"
psql_primary -c "insert into rep select g, md5(g::text) from generate_series(1, 1000) g" >/dev/null
replayed() { [ "$(psql_standby -c "select count(*) from rep" 2>/dev/null)" = "$1" ]; }
wait_for 60 replayed 1000 || fail "the standby did not replay the rows: $(psql_standby -c 'select count(*) from rep' 2>&1)"
echo "ok: streaming replication over RDMA with conf/standby.pg_rdma.conf (walsender on rdma, streaming, rows on the standby)"
walreceiver_row() {
    psql_standby -c "select o.transport || ' ' || host(o.remote_addr) || ' ' || o.remote_port || ' ' || o.requested
                     from pg_stat_rdma_outgoing o join pg_stat_wal_receiver w using (pid)"
}
[ "$(walreceiver_row)" = "rdma $IP 54430 true" ] ||
    fail "the standby's walreceiver in pg_stat_rdma_outgoing: '$(walreceiver_row)', want 'rdma $IP 54430 true'"
# The walreceiver runs as no role: another role sees its pid alone.
psql_primary -c "create role outgoing_other login" >/dev/null
others_view() {
    pg_cluster_use "$standby"
    as_pg "$PG_CLUSTER_BIN/psql" -X -At -h "$standby" -p 54431 -U outgoing_other -d postgres \
        -c "select count(*) || ' ' || count(transport) from pg_stat_rdma_outgoing o join pg_stat_wal_receiver w using (pid)"
}
role_replicated() { [ "$(others_view 2>/dev/null)" = "1 0" ]; }
wait_for 60 role_replicated || fail "another role sees the walreceiver's row as '$(others_view 2>&1)', want '1 0' (pid only)"
echo "ok: the standby's pg_stat_rdma_outgoing has its walreceiver's connection: $(walreceiver_row); other roles see its pid alone"

# Several hosts and target_session_attrs (a client program, libpq_rdma.so
# preloaded): every host is tried with the same policy, so require reaches
# the right server over RDMA whichever host comes first.
pg_cluster_use "$primary"
both_hosts="host=$IP,$IP port=54431,54430 user=postgres dbname=postgres with_rsocket=require"
for case in "read-write:false" "standby:true"; do
    attrs=${case%:*} want=${case##*:}
    got=$(pg_cluster_client env LD_PRELOAD="$so" "$PG_CLUSTER_BIN/psql" -X -At \
        -d "$both_hosts target_session_attrs=$attrs" \
        -c "select pg_is_in_recovery() || ' ' || (select transport from pg_stat_rdma where pid = pg_backend_pid())") ||
        fail "target_session_attrs=$attrs: $got"
    [ "$got" = "$want rdma" ] || fail "target_session_attrs=$attrs: '$got', want '$want rdma'"
done
grep -q "pg_rdma: connection upgraded" "$(pg_cluster_use "$standby"; pg_cluster_log)" ||
    fail "read-write: the standby (tried first) was not reached over RDMA"
echo "ok: two hosts with target_session_attrs (read-write, standby): each host tried over RDMA, the right one kept"

# The primary restarts mid-stream: the walreceiver reconnects over RDMA by itself.
pg_cluster_use "$primary"
pg_cluster_restart
wait_for 90 streaming_over_rdma || fail "after the primary's restart the standby did not stream over rdma again: '$(walsender_transport)'"
psql_primary -c "insert into rep select g, md5(g::text) from generate_series(1001, 2000) g" >/dev/null
wait_for 60 replayed 2000 || fail "after the restart the standby did not replay the new rows"
echo "ok: after a primary restart the standby reconnected over RDMA and replays"

# The primary loses pg_rdma (plain PostgreSQL on the same address): a
# standby with with_rsocket=true streams over TCP, saying so in its log; one
# with require keeps retrying, each attempt logged with the reason; pg_rdma
# back, the require standby streams over RDMA by itself.
slog=$(pg_cluster_use "$standby"; pg_cluster_log)
pg_cluster_use "$primary"
printf "shared_preload_libraries = ''\nlisten_addresses = '%s'\n" "$IP" | as_pg tee -a "$PG_CLUSTER_DATA/postgresql.conf" >/dev/null
pg_cluster_restart
streaming_plain() {
    [ "$(psql_primary -c "select state from pg_stat_replication where application_name = 'standby1'")" = streaming ]
}
wait_for 90 streaming_plain || fail "with_rsocket=true: the standby did not fall back to TCP against a primary without pg_rdma"
grep -q "with_rsocket: RDMA is not possible for server .*continuing over TCP" "$slog" ||
    fail "the standby's log does not say it fell back: $(tail -5 "$slog")"
echo "ok: primary without pg_rdma: the with_rsocket=true standby streams over TCP and logs why"
require_conninfo="host=$IP port=54430 user=postgres application_name=standby1 with_rsocket=require passfile=$primary/pgpass"
psql_standby -c "alter system set primary_conninfo = '$require_conninfo'" -c "select pg_reload_conf()" >/dev/null
refused() { [ "$(grep -c 'with_rsocket=require: RDMA is not possible' "$slog")" -ge 2 ]; }
wait_for 90 refused || fail "with_rsocket=require: the standby's log does not show retries with the reason: $(tail -5 "$slog")"
! streaming_plain || fail "with_rsocket=require: the standby streams without RDMA"
echo "ok: primary without pg_rdma: the require standby keeps retrying, logging why, and does not stream"
pg_cluster_use "$primary"
printf "shared_preload_libraries = 'pg_rdma'\nlisten_addresses = ''\n" | as_pg tee -a "$PG_CLUSTER_DATA/postgresql.conf" >/dev/null
pg_cluster_restart
wait_for 90 streaming_over_rdma || fail "pg_rdma back: the require standby did not stream over rdma: '$(walsender_transport)'"
echo "ok: pg_rdma back on the primary: the require standby streams over RDMA again"

# 4. Logical replication: a subscriber cluster's apply (and tablesync)
# workers connect with the subscription's with_rsocket=true.
psql_primary -c "create table pub_t (id int primary key, v text)" \
    -c "insert into pub_t select g, 'x' || g from generate_series(1, 500) g" \
    -c "create publication rdma_pub for table pub_t" >/dev/null
subscriber=$(mktemp -d /tmp/pg_rdma-subscriber.XXXXXX)
PG_CLUSTER_PORT=54432
# No RDMA listening here: its workers' waits go through the client library
# without the session hooks.
pg_cluster_init "$subscriber" "$build" "pg_rdma.listen_addresses = ''"
pg_cluster_start
psql_sub() { pg_cluster_use "$subscriber"; pg_cluster_psql "$@"; }
psql_sub -c "create table pub_t (id int primary key, v text)" >/dev/null
out=$(psql_sub -v publisher="$IP" -v port=54430 -v passfile="$primary/pgpass" -f "$conf/subscription.pg_rdma.sql" 2>&1) ||
    fail "conf/subscription.pg_rdma.sql: $out"
sub_transport() {
    psql_primary -c "select r.transport from pg_stat_replication s join pg_stat_rdma r using (pid)
                      where s.application_name = 'rdma_sub'"
}
sub_over_rdma() { [ "$(sub_transport)" = rdma ]; }
wait_for 90 sub_over_rdma || fail "the subscription's walsender is not on rdma: '$(sub_transport)'"
copied() { [ "$(psql_sub -c "select count(*) from pub_t" 2>/dev/null)" = "$1" ]; }
wait_for 90 copied 500 || fail "the initial copy did not arrive: $(psql_sub -c 'select count(*) from pub_t' 2>&1)"
psql_primary -c "insert into pub_t select g, 'y' || g from generate_series(501, 600) g" >/dev/null
wait_for 60 copied 600 || fail "rows inserted after the copy did not replicate"
psql_sub -c 'create extension pg_rdma' >/dev/null
apply_row() {
    psql_sub -c "select o.transport || ' ' || o.requested from pg_stat_rdma_outgoing o
                 join pg_stat_subscription s using (pid) where s.relid is null"
}
[ "$(apply_row)" = "rdma true" ] || fail "the apply worker's connection in pg_stat_rdma_outgoing: '$(apply_row)'"
echo "ok: logical replication over RDMA with conf/subscription.pg_rdma.sql (its walsender on rdma, initial copy and new rows; the apply worker listed in pg_stat_rdma_outgoing)"

for l in "$plog" "$(pg_cluster_use "$standby"; pg_cluster_log)" "$(pg_cluster_use "$subscriber"; pg_cluster_log)"; do
    ! grep -q 'was terminated by signal' "$l" || fail "a server process crashed ($l)"
done
echo "ok: no server process crashed"
