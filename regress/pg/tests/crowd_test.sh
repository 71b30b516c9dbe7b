#!/usr/bin/env bash
# Crowds and strangers, whole product in the Soft-RoCE guest: a real
# PostgreSQL 15 with the built pg_rdma, clients through the built pgrdma.
#   1. A storm: 200 libpq connections with with_rsocket=true started at the
#      same instant from one process (crowd.cpp); every one connects, on
#      RDMA or by a clean fallback to TCP. Setup latency p50/p99 printed.
#   1b. Many at once: 300 sessions open together, set up in waves of 100
#       (scripts/bench storm opens 500)
#      (a pool growing), every one connects, each on RDMA or after a clean
#      fallback (a warning naming the cause), and the server's pg_stat_rdma
#      counts the RDMA ones while all are open.
#   2. The caps on sessions not yet authenticated: 40 clients that upgrade
#      and then never send a startup packet, at a server with
#      pg_rdma.max_unauthenticated_sessions = 8: at most 8 get a queue
#      pair, the others are declined ('N', TCP), the memory pinned by the
#      backends stays within the cap, the declines are logged in a few
#      rate-limited lines, and a real session still connects once the
#      strangers are gone.
#   3. Strangers whose address pg_hba.conf rejects: every one is declined
#      before anything is pinned (no queue pair, no pinned memory), and a
#      with_rsocket=true client from there hears PostgreSQL's own refusal.
# Usage: crowd_test.sh BUILD_DIR CROWD UPGRADE_PROBE
set -euo pipefail
build=$1 crowd=$2 probe=$3
IP=${RXE_IP:?run in the Soft-RoCE guest}
# shellcheck source=regress/pg/cluster.sh
. "$(dirname "$(readlink -f "$0")")/../cluster.sh"
pgrdma=$build/libclient/pgrdma
STORM=200
MANY=300 WAVE=100
STRANGERS=40
CAP=8
HOLD_S=40  # how long a stranger holds its session silent

fail() { echo "FAIL: $*"; echo "--- server log (tail):"; tail -30 "$(pg_cluster_log)"; exit 1; }

# 1. The storm.
PG_CLUSTER_PORT=54420
pg_cluster_init "$(mktemp -d /tmp/pg_rdma-crowd.XXXXXX)" "$build" "max_connections = $((MANY + 20))"
pg_cluster_start
pg_cluster_set_password postgres secret
pg_cluster_psql -c 'create extension pg_rdma' >/dev/null
# One process, STORM connections of about 6 descriptors each (crowd raises
# its descriptor limit to the hard one; a session past it falls back to
# TCP). Its stderr has a fallback warning per session that went to TCP.
out=$(ulimit -l unlimited &&
      pg_cluster_client "$pgrdma" "$crowd" "dbname=postgres with_rsocket=true" "$STORM" 2>"$PG_CLUSTER_WORK/storm.err") ||
    fail "the storm of $STORM: $out; stderr: $(sort "$PG_CLUSTER_WORK/storm.err" | uniq -c | head -5)"
echo "$out" | sed 's/^/    /'
echo "    fallback warnings: $(sort "$PG_CLUSTER_WORK/storm.err" | uniq -c | head -3)"
grep -q "^connected=$STORM .* failed=0" <<<"$out" || fail "not every one of $STORM connected: $out"
grep -q "^connected=$STORM rdma=[1-9]" <<<"$out" || fail "no session of the storm got RDMA: $out"
grep -q 'terminated by signal' "$(pg_cluster_log)" && fail "a backend crashed"
echo "ok: a storm of $STORM with_rsocket=true connections at once: all connected ($(head -1 <<<"$out"))"

# 1b. Many at once, held open while the server is asked how many it serves
# over RDMA.
hold_s=20
counted=$PG_CLUSTER_WORK/many.count
(ulimit -l unlimited &&
     pg_cluster_client "$pgrdma" "$crowd" "dbname=postgres with_rsocket=true" "$MANY" "$hold_s" "$WAVE" \
         >"$PG_CLUSTER_WORK/many.out" 2>"$PG_CLUSTER_WORK/many.err") &
many=$!
at_peak() { grep -q '^peak ' "$PG_CLUSTER_WORK/many.out" 2>/dev/null || ! kill -0 "$many" 2>/dev/null; }
wait_for 600 at_peak || fail "$MANY sessions in waves of $WAVE did not all finish their setup in 600 s"
pg_cluster_psql -c "select count(*) from pg_stat_rdma where transport = 'rdma'" >"$counted" 2>&1
wait "$many" || fail "$MANY sessions in waves of $WAVE: $(cat "$PG_CLUSTER_WORK/many.out");" \
    "stderr: $(sort "$PG_CLUSTER_WORK/many.err" | uniq -c | head -5)"
out=$(cat "$PG_CLUSTER_WORK/many.out")
echo "$out" | sed 's/^/    /'
grep -q "^connected=$MANY .* failed=0" <<<"$out" || fail "not every one of $MANY connected: $out"
rdma=$(sed -n 's/^connected=[0-9]* rdma=\([0-9]*\) tcp=\([0-9]*\).*/\1/p' <<<"$out")
tcp=$(sed -n 's/^connected=[0-9]* rdma=\([0-9]*\) tcp=\([0-9]*\).*/\2/p' <<<"$out")
[ "$rdma" -ge 1 ] || fail "no session of $MANY got RDMA: $out"
# Each on TCP went there cleanly: the client said why, once per session.
warned=$(grep -c 'with_rsocket: RDMA is not possible' "$PG_CLUSTER_WORK/many.err" || true)
[ "$warned" -eq "$tcp" ] || fail "$tcp sessions on TCP but $warned fallback warnings: $(head -3 "$PG_CLUSTER_WORK/many.err")"
# The server saw them all at once: its view counts the RDMA sessions the
# clients found (the psql asking is on TCP).
[ "$(cat "$counted")" = "$rdma" ] || fail "pg_stat_rdma counted $(cat "$counted") RDMA sessions at the peak, the clients $rdma"
grep -q 'terminated by signal' "$(pg_cluster_log)" && fail "a backend crashed"
echo "ok: $MANY concurrent with_rsocket=true sessions (waves of $WAVE): all connected, $rdma on RDMA, $tcp fell back cleanly"
pg_cluster_stop

# 2. Strangers at a capped server.
PG_CLUSTER_PORT=54421
pg_cluster_init "$(mktemp -d /tmp/pg_rdma-strangers.XXXXXX)" "$build" "max_connections = $((STRANGERS + 20))" \
    "pg_rdma.max_unauthenticated_sessions = $CAP" "authentication_timeout = 60s"
pg_cluster_start
pg_cluster_set_password postgres secret
log=$(pg_cluster_log)
postmaster=$(head -1 "$PG_CLUSTER_DATA/postmaster.pid")
# Pinned memory (VmPin, kB) of the postmaster's children now.
pinned_kb() {
    local sum=0 pid kb
    for pid in $(pgrep -P "$postmaster"); do
        kb=$(awk '/^VmPin:/ {print $2}' "/proc/$pid/status" 2>/dev/null) || kb=0
        sum=$((sum + ${kb:-0}))
    done
    echo "$sum"
}
# STRANGERS upgrade probes that then hold their session silent; pids[].
start_strangers() {
    rm -f "$PG_CLUSTER_WORK"/stranger.*
    pids=()
    local i
    for i in $(seq "$STRANGERS"); do
        "$probe" "$IP" "$PG_CLUSTER_PORT" prefer "$HOLD_S" >"$PG_CLUSTER_WORK/stranger.$i" 2>&1 &
        pids+=($!)
    done
}
before=$(pinned_kb)
start_strangers
# Every stranger has its answer (rdma, or tcp after the decline).
answered() { [ "$(cat "$PG_CLUSTER_WORK"/stranger.* 2>/dev/null | grep -c '^rdma:\|^tcp:')" -ge "$STRANGERS" ]; }
wait_for 120 answered || fail "not every stranger was answered: $(cat "$PG_CLUSTER_WORK"/stranger.* | sort | uniq -c)"
rdma=$(cat "$PG_CLUSTER_WORK"/stranger.* | grep -c '^rdma:' || true)
tcp=$(cat "$PG_CLUSTER_WORK"/stranger.* | grep -c '^tcp:' || true)
peak=$(pinned_kb)
per_session_kb=388  # rx_buffer_size 256 kB + 128 kB staging + control slots (README)
echo "    strangers: $rdma on RDMA, $tcp declined; backends pin $((peak - before)) kB (cap: $CAP x $per_session_kb kB)"
[ "$rdma" -le "$CAP" ] || fail "$rdma strangers got a queue pair, over max_unauthenticated_sessions = $CAP"
[ "$rdma" -ge 1 ] || fail "no stranger got RDMA: the cap should admit $CAP"
[ $((rdma + tcp)) -eq "$STRANGERS" ] || fail "strangers: $rdma rdma + $tcp tcp != $STRANGERS"
[ $((peak - before)) -le $(((CAP + 1) * per_session_kb)) ] ||
    fail "the backends pin $((peak - before)) kB for $rdma strangers, over the cap's $((CAP * per_session_kb)) kB"
lines=$(grep -c 'pg_rdma: declined .* RDMA upgrade(s) since the last such line' "$log" || true)
[ "$lines" -ge 1 ] || fail "no log line for the declined strangers"
[ "$lines" -le 5 ] || fail "$lines log lines for $tcp declines: not rate-limited"
grep -q 'DETAIL:  .*pg_rdma.max_unauthenticated_sessions' "$log" || fail "the decline's DETAIL does not name the cap"
echo "ok: $STRANGERS strangers at a server capped at $CAP: $rdma on RDMA, $tcp declined, $((peak - before)) kB pinned, $lines log line(s)"
for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
wait 2>/dev/null || true
pg_cluster_psql -c 'create extension pg_rdma' >/dev/null
# The counters saw each decline for the cap (a stranger on TCP for another
# reason would be counted under it instead).
over_cap=$(pg_cluster_psql -c "select sessions from pg_stat_rdma_outcomes where outcome = 'over_cap'")
[ "$over_cap" -ge 1 ] && [ "$over_cap" -le "$tcp" ] ||
    fail "pg_stat_rdma_outcomes counts $over_cap over_cap for $tcp declined: $(pg_cluster_psql -c 'select * from pg_stat_rdma_outcomes where sessions > 0')"
echo "ok: pg_stat_rdma_outcomes: $(pg_cluster_psql -c "select string_agg(outcome || '=' || sessions, ' ') from pg_stat_rdma_outcomes where sessions > 0")"
# Their places are given back (the backends end at the client's close or
# at authentication_timeout): a real client gets RDMA again.
me="select transport from pg_stat_rdma where pid = pg_backend_pid()"
on_rdma() { [ "$(pg_cluster_client "$pgrdma" psql -X -At -d "dbname=postgres with_rsocket=true" -c "$me" 2>/dev/null)" = rdma ]; }
wait_for 90 on_rdma || fail "after the strangers left, a client did not get RDMA: $(pg_cluster_client "$pgrdma" psql -X -At -d "dbname=postgres with_rsocket=require" -c "$me" 2>&1)"
grep -q 'terminated by signal' "$log" && fail "a backend crashed"
echo "ok: after the strangers left, sessions get RDMA again"

# 3. Strangers whose address no pg_hba.conf line admits. pg_rdma judges
# the file only once the postmaster has loaded it: a new session's
# pg_conf_load_time() is the postmaster's.
reload_and_wait() {
    local loaded
    loaded=$(pg_cluster_psql -c 'select pg_conf_load_time()')
    pg_cluster_psql -c 'select pg_reload_conf()' >/dev/null
    reloaded() { [ "$(pg_cluster_psql -c 'select pg_conf_load_time()')" != "$loaded" ]; }
    wait_for 30 reloaded || fail "the server did not reload its configuration"
}
# One stranger's answer: rdma or tcp.
one_stranger() {
    timeout 60 "$probe" "$IP" "$PG_CLUSTER_PORT" prefer 1 2>&1 | sed -n 's/^\(rdma\|tcp\):.*/\1/p' | head -1
}
# 3a. Ordinary connections rejected, replication ones still possible: a
# later "host replication" line could admit, so no decline.
as_pg sed -i "1i host all all $IP/32 reject" "$PG_CLUSTER_DATA/pg_hba.conf"
reload_and_wait
[ "$(one_stranger)" = rdma ] || fail "with only 'host all all $IP/32 reject' (replication still admitted) a stranger was declined"
# 3b. Replication rejected too, but not yet reloaded: PostgreSQL still
# admits replication from there, so no decline either.
as_pg sed -i "2i host replication all $IP/32 reject" "$PG_CLUSTER_DATA/pg_hba.conf"
[ "$(one_stranger)" = rdma ] || fail "a pg_hba.conf edited but not reloaded declined a stranger the loaded rules admit"
echo "ok: no decline while some connection from the address could be admitted, or before a reload"
# 3c. Loaded: every connection from there is rejected.
reload_and_wait
before=$(pinned_kb)
start_strangers
wait_for 120 answered || fail "not every rejected stranger was answered: $(cat "$PG_CLUSTER_WORK"/stranger.* | sort | uniq -c)"
rdma=$(cat "$PG_CLUSTER_WORK"/stranger.* | grep -c '^rdma:' || true)
peak=$(pinned_kb)
echo "    rejected strangers: $rdma on RDMA of $STRANGERS; backends pin $((peak - before)) kB"
[ "$rdma" -eq 0 ] || fail "$rdma strangers whose address pg_hba.conf rejects got a queue pair"
[ "$peak" -le "$before" ] || fail "the backends of rejected strangers pin $((peak - before)) kB"
grep -q 'DETAIL:  no line of pg_hba.conf admits this address (rejected by line 2); nothing was pinned' "$log" ||
    fail "no log line says pg_hba.conf rejects the strangers"
for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
wait 2>/dev/null || true
# A real client from there: on TCP at once, and PostgreSQL's refusal.
out=$(pg_cluster_client "$pgrdma" psql -X -At -d "dbname=postgres with_rsocket=true" -c 'select 1' 2>&1) &&
    fail "a client whose address pg_hba.conf rejects connected: $out"
grep -q 'pg_hba.conf rejects connection' <<<"$out" || fail "the rejected client did not hear PostgreSQL's refusal: $out"
# require: the reason is the decline, then nothing more to try.
out=$(pg_cluster_client "$pgrdma" psql -X -At -d "dbname=postgres with_rsocket=require" -c 'select 1' 2>&1) &&
    fail "with_rsocket=require connected from a rejected address: $out"
grep -q 'pg_hba.conf' <<<"$out" || fail "with_rsocket=require from a rejected address does not point at pg_hba.conf: $out"
echo "    with_rsocket=require from there: $(head -1 <<<"$out")"
grep -q 'terminated by signal' "$log" && fail "a backend crashed"
echo "ok: $STRANGERS strangers whose address pg_hba.conf rejects: none on RDMA, nothing pinned; a client hears PostgreSQL's refusal"
