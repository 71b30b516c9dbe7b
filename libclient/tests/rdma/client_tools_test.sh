#!/usr/bin/env bash
# PostgreSQL's client programs through libpq_rdma.so in the Soft-RoCE guest,
# against a real PostgreSQL 15 with the built pg_rdma. A tool counts as over
# RDMA only when the server says so while it runs: a watcher session samples
# pg_stat_rdma joined with pg_stat_activity (application_name) every 50 ms.
# Also: the conf/pg_service.conf sample through psql, psql's \connect keeping
# with_rsocket, pg_basebackup -R (-X stream: its forked WAL streamer too)
# keeping it in primary_conninfo (asked in the conninfo or by WITH_RSOCKET),
# a dump over RDMA byte-identical to TCP's, and pg_dump -j and pg_restore -j,
# whose workers, forked after their leader used RDMA, connect over RDMA too.
# Usage: client_tools_test.sh LIBPQ_RDMA_SO PGRDMA BUILD_DIR
set -euo pipefail
so=$1 pgrdma=$2 build=$3
IP=${RXE_IP:?run in the Soft-RoCE guest}
root=$(dirname "$(readlink -f "$0")")/../../..
# shellcheck source=regress/pg/cluster.sh
. "$root/regress/pg/cluster.sh"

PG_CLUSTER_PORT=54425
pg_cluster_init "$(mktemp -d /tmp/pg_rdma-tools.XXXXXX)" "$build" \
    "log_connections = on" "log_disconnections = on"
pg_cluster_start
pg_cluster_set_password postgres secret
pg_cluster_psql -c 'create extension pg_rdma' >/dev/null
log=$(pg_cluster_log)
work=$PG_CLUSTER_WORK
chmod 755 "$work"
cp "$work/pgpass" /tmp/pg_rdma-tools.pgpass && chmod 600 /tmp/pg_rdma-tools.pgpass
export PGPASSFILE=/tmp/pg_rdma-tools.pgpass PGCONNECT_TIMEOUT=30
bin=$PG_CLUSTER_BIN
rdma="host=$IP port=$PG_CLUSTER_PORT user=postgres"
fail() { echo "FAIL: $*"; echo "--- server log:"; tail -30 "$log"; exit 1; }

# A table big enough that every tool's session lives for many samples.
pg_cluster_psql -c "create table big as select g, md5(g::text) as h from generate_series(1, 200000) g" >/dev/null

# The watcher: one superuser session over the Unix socket (never pg_rdma's).
seen=$work/seen
# Walsenders also as "wal COMMAND transport", to tell a WAL stream
# (START_REPLICATION) from a base backup.
pg_cluster_psql >"$seen" 2>&1 <<'SQL' &
select a.application_name || ' ' || r.transport
  from pg_stat_rdma r join pg_stat_activity a using (pid)
 where r.pid <> pg_backend_pid()
union all
select 'wal ' || split_part(a.query, ' ', 1) || ' ' || r.transport
  from pg_stat_rdma r join pg_stat_activity a using (pid)
 where a.backend_type = 'walsender' \watch 0.05
SQL
watcher=$!
trap 'kill $watcher 2>/dev/null || true; pg_cluster_cleanup' EXIT
# saw APP: the watcher saw APP's session on rdma, and never on tcp.
saw() {
    grep -qx "$1 rdma" "$seen" || fail "$1: pg_stat_rdma never showed its session on rdma (saw: $(sort -u "$seen" | tr '\n' ';'))"
    ! grep -qx "$1 tcp" "$seen" || fail "$1: a session of it was on tcp"
}

# 1. pg_dump over RDMA, byte-identical to the same dump over TCP (one
# \restrict key for both: pg_dump 15.14+ draws a random one per run).
key=pgrdmatest
LD_PRELOAD=$so "$bin/pg_dump" -d "$rdma dbname=postgres with_rsocket=require" -t big --restrict-key=$key \
    -f "$work/rdma.sql" || fail "pg_dump over RDMA"
PGAPPNAME=tcp_dump "$bin/pg_dump" -d "$rdma dbname=postgres" -t big --restrict-key=$key -f "$work/tcp.sql" || fail "pg_dump over TCP"
cmp "$work/rdma.sql" "$work/tcp.sql" || fail "the dump over RDMA differs from the dump over TCP"
saw pg_dump
echo "ok: pg_dump over RDMA ($(stat -c %s "$work/rdma.sql") bytes), byte-identical to TCP's"

# 1b. pg_dump -j 2 (directory format) forks its workers after its leader
# connected over RDMA, and each worker connects itself: a process forked
# after its parent used RDMA sets RDMA up on a device context of its own
# (transport/endpoint.hpp). With require, a worker that could not would
# fail the dump. The server's log counts the upgrades: the leader's and
# both workers'. pg_restore -j 2 of that dump forks its workers the same way.
upgrades() { grep -c 'pg_rdma: connection upgraded' "$log" || true; }
before=$(upgrades)
LD_PRELOAD=$so PGAPPNAME=pg_dump_j "$bin/pg_dump" -d "$rdma dbname=postgres with_rsocket=require" -t big -Fd -j 2 \
    -f "$work/dir" 2>"$work/err" || fail "pg_dump -j 2 with with_rsocket=require: $(cat "$work/err")"
[ ! -s "$work/err" ] || fail "pg_dump -j 2 wrote: $(cat "$work/err")"
[ $(($(upgrades) - before)) -ge 3 ] ||
    fail "pg_dump -j 2: $(($(upgrades) - before)) sessions upgraded, not 3 (the leader and two workers)"
saw pg_dump_j
rows=$("$bin/pg_restore" -f - "$work/dir" | awk '/^COPY public.big /{on=1; next} /^\\\.$/{on=0} on' | wc -l)
[ "$rows" = 200000 ] || fail "pg_dump -j 2: the dump holds $rows rows of big, not 200000"
pg_cluster_psql -c 'create database restored_j' >/dev/null
before=$(upgrades)
LD_PRELOAD=$so PGAPPNAME=pg_restore_j "$bin/pg_restore" -d "$rdma dbname=restored_j with_rsocket=require" -j 2 \
    "$work/dir" 2>"$work/err" || fail "pg_restore -j 2 with with_rsocket=require: $(cat "$work/err")"
[ ! -s "$work/err" ] || fail "pg_restore -j 2 wrote: $(cat "$work/err")"
[ $(($(upgrades) - before)) -ge 3 ] ||
    fail "pg_restore -j 2: $(($(upgrades) - before)) sessions upgraded, not 3 (the leader and two workers)"
[ "$(pg_cluster_psql -d restored_j -c 'select count(*) from big')" = 200000 ] || fail "pg_restore -j 2: rows missing"
saw pg_restore_j
echo "ok: pg_dump -j 2 and pg_restore -j 2 with with_rsocket=require: the leader and its forked workers over RDMA"

# 2. pg_restore into a new database over RDMA (a custom-format dump).
PGAPPNAME=tcp_dump "$bin/pg_dump" -d "$rdma dbname=postgres" -t big -Fc -f "$work/big.dump"
pg_cluster_psql -c 'create database restored' >/dev/null
"$pgrdma" "$bin/pg_restore" -d "$rdma dbname=restored with_rsocket=true" "$work/big.dump" 2>"$work/err" ||
    fail "pg_restore over RDMA: $(cat "$work/err")"
[ ! -s "$work/err" ] || fail "pg_restore wrote: $(cat "$work/err")"
[ "$(pg_cluster_psql -d restored -c 'select count(*) from big')" = 200000 ] || fail "pg_restore: rows missing"
saw pg_restore
echo "ok: pgrdma pg_restore over RDMA"

# 3. pg_dumpall: its own sessions and the pg_dump it runs per database get
# the connection string with with_rsocket (it echoes PQconninfoParse's options).
LD_PRELOAD=$so "$bin/pg_dumpall" -d "$rdma with_rsocket=require" -f "$work/all.sql" 2>"$work/err" ||
    fail "pg_dumpall over RDMA: $(cat "$work/err")"
grep -q '^CREATE TABLE public.big' "$work/all.sql" || fail "pg_dumpall: no table big in the dump"
saw pg_dumpall
echo "ok: pg_dumpall over RDMA (with its pg_dump runs)"

# 4. pgbench: zero failed transactions, every client on rdma.
LD_PRELOAD=$so "$bin/pgbench" -i -q -s 1 "$rdma dbname=postgres with_rsocket=require" >/dev/null 2>&1 ||
    fail "pgbench -i over RDMA"
LD_PRELOAD=$so "$bin/pgbench" -n -c 2 -T 5 "$rdma dbname=postgres with_rsocket=require" >"$work/out" 2>&1 ||
    fail "pgbench over RDMA: $(cat "$work/out")"
grep -q 'number of failed transactions: 0 ' "$work/out" || fail "pgbench: $(cat "$work/out")"
saw pgbench
echo "ok: pgbench over RDMA, 0 failed ($(grep -o 'tps = [0-9.]*' "$work/out" | head -1))"

# 5. pg_basebackup -R with its default -X stream: the base backup's
# walsender on rdma, and the WAL streamer too, although pg_basebackup opens
# that connection and then streams in a forked child (the parent hands the
# session over and relays it: transport/fork_handover.hpp). The backup
# verifies (pg_verifybackup parses the streamed WAL), and primary_conninfo
# keeps with_rsocket whether the conninfo or WITH_RSOCKET asked for it.
LD_PRELOAD=$so "$bin/pg_basebackup" -d "$rdma with_rsocket=true" -D "$work/backup1" -R -c fast \
    2>"$work/err" || fail "pg_basebackup over RDMA: $(cat "$work/err")"
[ ! -s "$work/err" ] || fail "pg_basebackup wrote: $(cat "$work/err")"
saw pg_basebackup
saw "wal START_REPLICATION"
"$bin/pg_verifybackup" "$work/backup1" >"$work/out" 2>&1 || fail "pg_verifybackup: $(cat "$work/out")"
grep -q "^primary_conninfo = '.*with_rsocket=true" "$work/backup1/postgresql.auto.conf" ||
    fail "pg_basebackup -R lost with_rsocket: $(grep primary_conninfo "$work/backup1/postgresql.auto.conf")"
WITH_RSOCKET=true "$pgrdma" "$bin/pg_basebackup" -d "$rdma" -D "$work/backup2" -R -c fast 2>"$work/err" ||
    fail "pg_basebackup with WITH_RSOCKET: $(cat "$work/err")"
"$bin/pg_verifybackup" "$work/backup2" >"$work/out" 2>&1 || fail "pg_verifybackup (WITH_RSOCKET): $(cat "$work/out")"
grep -q "^primary_conninfo = '.*with_rsocket=true" "$work/backup2/postgresql.auto.conf" ||
    fail "pg_basebackup -R under WITH_RSOCKET=true: $(grep primary_conninfo "$work/backup2/postgresql.auto.conf")"
echo "ok: pg_basebackup -R (-X stream) over RDMA, WAL streamer included, backups verify; primary_conninfo keeps with_rsocket (conninfo and WITH_RSOCKET)"
LD_PRELOAD=$so "$bin/pg_basebackup" -d "$rdma with_rsocket=require" -D "$work/backup3" -X fetch -c fast \
    2>"$work/err" || fail "pg_basebackup -X fetch over RDMA: $(cat "$work/err")"
"$bin/pg_verifybackup" "$work/backup3" >"$work/out" 2>&1 || fail "pg_verifybackup (-X fetch): $(cat "$work/out")"
echo "ok: pg_basebackup -X fetch over RDMA"

# 6. pg_receivewal streams over RDMA until stopped.
mkdir "$work/wal"
LD_PRELOAD=$so "$bin/pg_receivewal" -d "$rdma with_rsocket=require" -D "$work/wal" 2>"$work/err" &
receiver=$!
# Done once it has written WAL (its first file appears when the first WAL
# arrives: seconds after it connects in the emulated guest), not after a
# fixed sleep.
wal_written() { ls "$work/wal" | grep -q .; }
switch_and_look() { pg_cluster_psql -c 'select pg_switch_wal()' >/dev/null; sleep 0.5; wal_written; }
wait_for 60 switch_and_look || { kill -INT $receiver; fail "pg_receivewal wrote no WAL: $(cat "$work/err")"; }
kill -INT $receiver
wait $receiver || true
saw pg_receivewal
echo "ok: pg_receivewal over RDMA"

# 7. psql: the conf/ service sample (an explicit port beats the section's),
# and \connect reusing the previous connection's with_rsocket.
svc="$root/conf/pg_service.conf"
pg_cluster_psql -d restored -c 'create extension pg_rdma' >/dev/null
q="select application_name || ' ' || transport from pg_stat_rdma join pg_stat_activity using (pid) where pid = pg_backend_pid()"
for case in "pg_rdma:rdma" "pg_rdma_tcp:tcp" "pg_rdma with_rsocket=false:tcp"; do
    service=${case%:*} want=${case##*:}
    got=$(PGSERVICEFILE=$svc PGAPPNAME=svc "$pgrdma" "$bin/psql" -X -At \
        -d "service=$service port=$PG_CLUSTER_PORT user=postgres" -c "$q") || fail "psql service=$service: $got"
    [ "$got" = "svc $want" ] || fail "psql service=$service: '$got', want $want"
done
got=$(PGSERVICEFILE=$svc PGSERVICE=pg_rdma PGAPPNAME=svc \
    "$pgrdma" "$bin/psql" -X -At -d "port=$PG_CLUSTER_PORT user=postgres" -c "$q") || fail "psql with PGSERVICE: $got"
[ "$got" = "svc rdma" ] || fail "PGSERVICE=pg_rdma: '$got'"
out=$(PGAPPNAME=reuse LD_PRELOAD=$so "$bin/psql" -X -At -d "$rdma dbname=postgres with_rsocket=require" <<SQL
$q;
\connect restored
$q;
\connect "$rdma dbname=postgres with_rsocket=false"
$q;
SQL
) || fail "psql \\connect: $out"
[ "$(echo "$out" | grep -c '^reuse rdma$')" = 2 ] && grep -qx 'reuse tcp' <<<"$out" ||
    fail "psql \\connect did not keep (or change) with_rsocket: $out"
echo "ok: psql with the conf/pg_service.conf sample (rdma, tcp, connection false wins; PGSERVICE) and \\connect"

kill $watcher 2>/dev/null || true
grep -q 'server process .* was terminated' "$log" && fail "a backend crashed"
echo "ok: no backend crashed"
