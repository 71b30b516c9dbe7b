#!/usr/bin/env bash
# A real PostgreSQL 15 server in the Soft-RoCE guest with the built pg_rdma
# preloaded, configured by the conf/ samples through regress/pg/cluster.sh:
# it listens on the rxe address only because pg_rdma added it, plain psql
# reaches it over TCP with scram-sha-256 (and TLS), log_connections shows the
# real peer, the extension and pg_stat_rdma work, the samples' commented
# defaults are the server's, the systemd drop-in's memlock limit is what RDMA
# sessions need (below it they stay on TCP, the log naming the limit), and it
# shuts down cleanly: the harness and the TCP side every RDMA test builds on.
# Usage: cluster_test.sh BUILD_DIR   (suite 'rdma': runs in the guest, as root)
set -euo pipefail
build=$(readlink -f "$1")
here=$(dirname "$(readlink -f "$0")")
# shellcheck source=regress/pg/cluster.sh
. "$here/../cluster.sh"
: "${RXE_IP:?run in the Soft-RoCE guest (regress/run-rdma-suite)}"

fail() { echo "FAIL: $*"; echo "---- server log:"; cat "$(pg_cluster_log)" 2>/dev/null; exit 1; }
ok() { echo "ok: $* (${SECONDS}s)"; }

PG_CLUSTER_PORT=54341
work=$(mktemp -d /tmp/pg_rdma-cluster.XXXXXX)
pg_cluster_init "$work" "$build" || fail "pg_cluster_init"
pg_cluster_make_certs || fail "pg_cluster_make_certs"
pg_cluster_start || fail "the server did not start"
ok "the server started with pg_rdma preloaded (staged from $build)"

[ "$(pg_cluster_psql -c 'show shared_preload_libraries')" = pg_rdma ] || fail "pg_rdma is not preloaded"
[ "$(pg_cluster_psql -c 'show listen_addresses')" = "$RXE_IP" ] ||
    fail "listen_addresses is not pg_rdma's address $RXE_IP"
ok "pg_rdma put $RXE_IP into listen_addresses (the cluster sets none itself)"

# The samples' commented defaults must be what the server really uses (one
# psql for all: each start costs ~0.5 s in the guest).
mapfile -t sample < <(sed -nE 's/^#(pg_rdma\.[a-z_]+) = ([^ ]+).*/\1 \2/p' "$PG_RDMA_ROOT/conf/postgresql.pg_rdma.conf")
[ "${#sample[@]}" -ge 7 ] || fail "conf/postgresql.pg_rdma.conf lists ${#sample[@]} commented pg_rdma settings, expected 7"
shows=()
for line in "${sample[@]}"; do shows+=(-c "show ${line%% *}"); done
mapfile -t actual < <(pg_cluster_psql "${shows[@]}") || fail "show pg_rdma.*"
for i in "${!sample[@]}"; do
    [ "${sample[$i]#* }" = "${actual[$i]:-}" ] ||
        fail "conf/postgresql.pg_rdma.conf says ${sample[$i]}, the server's default is '${actual[$i]:-}'"
done
ok "conf/postgresql.pg_rdma.conf's commented values are the server's defaults"

pg_cluster_set_password app 'app secret' || fail "pg_cluster_set_password"
pg_cluster_psql -c 'grant pg_read_all_stats to app' >/dev/null
peer=$(PGUSER=app pg_cluster_psql_tcp "sslmode=disable" -c 'select inet_client_addr()') ||
    fail "plain psql over TCP to $RXE_IP:$PG_CLUSTER_PORT as app (scram-sha-256)"
[ "$peer" = "$RXE_IP" ] || fail "inet_client_addr() is '$peer', not $RXE_IP"
ok "plain psql over TCP to $RXE_IP with scram-sha-256; the server sees the real peer"

out=$(PGUSER=app PGPASSFILE=/dev/null PGPASSWORD=wrong pg_cluster_client psql -X -At -c 'select 1' 2>&1) &&
    fail "a wrong password was accepted: pg_hba is not scram-sha-256 for $RXE_IP"
grep -q 'password authentication failed for user "app"' <<<"$out" || fail "wrong password: unexpected error: $out"
# (16 and later name the file: 'Connection matched file "/path/pg_hba.conf" line N')
grep -qE 'Connection matched (pg_hba\.conf|file "[^"]*/pg_hba\.conf") line [0-9]+: "host +all +all +10\.99\.0\.0/24 +scram-sha-256"' \
    "$(pg_cluster_log)" || fail "the session did not match conf/pg_hba.pg_rdma.conf's line"
ok "a wrong password is refused (conf/pg_hba.pg_rdma.conf's scram-sha-256 line)"

pg_cluster_psql -c 'create extension pg_rdma' >/dev/null || fail "CREATE EXTENSION pg_rdma"
rows=$(PGUSER=app pg_cluster_psql_tcp "" -c 'select count(*) from pg_stat_rdma') ||
    fail "select from pg_stat_rdma over TCP as a pg_read_all_stats member"
[[ $rows =~ ^[0-9]+$ ]] || fail "pg_stat_rdma count is '$rows'"
ok "CREATE EXTENSION pg_rdma; pg_stat_rdma has $rows row(s)"

for mode in require verify-ca verify-full; do
    ssl=$(PGUSER=app pg_cluster_psql_tcp "sslmode=$mode" \
        -c 'select ssl from pg_stat_ssl where pid = pg_backend_pid()') || fail "psql with sslmode=$mode"
    [ "$ssl" = t ] || fail "sslmode=$mode: the session is not encrypted ($ssl)"
done
ok "TLS over TCP with the test CA: sslmode=require, verify-ca, verify-full"

# The service file sample: plain libpq reads the TCP section, and (as the
# sample says) refuses the with_rsocket sections without pg_rdma's client.
svc=$PG_RDMA_ROOT/conf/pg_service.conf
[ "$(PGUSER=app PGSERVICEFILE=$svc pg_cluster_client psql -X -At \
    -d "service=pg_rdma_tcp port=$PG_CLUSTER_PORT" -c 'select 7')" = 7 ] ||
    fail "conf/pg_service.conf's [pg_rdma_tcp] section does not connect"
out=$(PGUSER=app PGSERVICEFILE=$svc pg_cluster_client psql -X -At \
    -d "service=pg_rdma port=$PG_CLUSTER_PORT" -c 'select 7' 2>&1) &&
    fail "plain libpq accepted with_rsocket in conf/pg_service.conf: the sample's note is wrong"
grep -q 'syntax error in service file' <<<"$out" || fail "service=pg_rdma with plain libpq: $out"
ok "conf/pg_service.conf: [pg_rdma_tcp] works with plain libpq, [pg_rdma] needs pg_rdma's client"

log=$(pg_cluster_log)
grep -q "connection received: host=$RXE_IP port=" "$log" || fail "log_connections: no 'connection received' from $RXE_IP"
grep -q 'connection authorized: user=app database=postgres.* SSL enabled' "$log" ||
    fail "log_connections: no 'connection authorized' line for the TLS session"
grep -q "disconnection: session time: .* user=app database=postgres host=$RXE_IP" "$log" ||
    fail "log_disconnections: no line for app from $RXE_IP"
ok "log_connections/log_disconnections name the TCP peer $RXE_IP"

# Memory locking: with the postmaster's RLIMIT_MEMLOCK below what one RDMA
# session pins, with_rsocket=true stays on TCP with one warning and require
# fails, the server's log naming the limit; with the LimitMEMLOCK of
# conf/systemd's drop-in, the same sessions run over RDMA. The running
# postmaster's limit is set (prlimit --pid): backends inherit it, and the
# clients keep theirs (runuser's PAM session would reset a shell's limit).
so=$build/libclient/preload/libpq_rdma.so
rpsql() { PGUSER=app pg_cluster_client env LD_PRELOAD="$so" psql -X -At -d "dbname=postgres $1" -c 'select 1'; }
upgraded() { grep -c 'pg_rdma: connection upgraded' "$log" || true; }
postmaster=$(head -1 "$PG_CLUSTER_DATA/postmaster.pid")
prlimit --pid "$postmaster" --memlock=262144:262144
before=$(upgraded)
out=$(rpsql "with_rsocket=true" 2>&1) || fail "with_rsocket=true under a low memlock limit: $out"
grep -q "WARNING:  with_rsocket: RDMA is not possible" <<<"$out" || fail "true under a low memlock limit: $out"
out=$(rpsql "with_rsocket=require" 2>&1) && fail "with_rsocket=require connected under a low memlock limit"
grep -q "with_rsocket=require: RDMA is not possible" <<<"$out" || fail "require under a low memlock limit: $out"
grep -q "RLIMIT_MEMLOCK is 256 KiB" "$log" || fail "the server's log does not name the memlock limit"
[ "$(upgraded)" = "$before" ] || fail "a session was upgraded under a 256 KiB memlock limit"
# Where a DBA looks: the counters name the cause, and so does the row of a
# session that fell back.
pg_cluster_psql -c 'create extension if not exists pg_rdma' >/dev/null
memlock=$(pg_cluster_psql -c "select sessions from pg_stat_rdma_outcomes where outcome = 'memlock'")
# (No session before these two met the low limit.)
[ "$memlock" = 2 ] ||
    fail "pg_stat_rdma_outcomes counts $memlock memlock fallback(s) for 2: $(pg_cluster_psql -c 'select * from pg_stat_rdma_outcomes where sessions > 0')"
out=$(PGUSER=app pg_cluster_client env LD_PRELOAD="$so" psql -X -At -d "dbname=postgres with_rsocket=true" \
    -c 'select requested, reason from pg_stat_rdma where pid = pg_backend_pid()' 2>/dev/null) || fail "$out"
grep -q '^t|RLIMIT_MEMLOCK is 256 KiB' <<<"$out" || fail "pg_stat_rdma's row of a session under the low limit: $out"
drop_in=$PG_RDMA_ROOT/conf/systemd/postgresql@.service.d/pg_rdma.conf
limit=$(sed -n 's/^LimitMEMLOCK=//p' "$drop_in")
[ "$limit" = infinity ] || fail "conf/systemd's drop-in sets LimitMEMLOCK=$limit"
prlimit --pid "$postmaster" --memlock=unlimited:unlimited  # systemd's "infinity"
out=$(rpsql "with_rsocket=require" 2>&1) || fail "require with the drop-in's memlock limit: $out"
[ "$(upgraded)" -gt "$before" ] || fail "no session was upgraded with the drop-in's memlock limit"
ok "memlock: below a session's need true stays on TCP and require fails (the log names the limit); the drop-in's LimitMEMLOCK=infinity gives RDMA"

pg_cluster_stop || fail "the server did not stop cleanly"
grep -q 'database system is shut down' "$log" || fail "no clean shutdown in the log"
ok "the server stopped cleanly"
