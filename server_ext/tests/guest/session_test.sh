#!/usr/bin/env bash
# PostgreSQL sessions over RDMA, server side: a real PostgreSQL 15 with the
# built pg_rdma (staged, see ../stage.sh), pg_rdma.listen_addresses on the
# guest's rxe0 address, and pg_wire_probe (a protocol-3 client over the
# transport) as the client. Runs in the Soft-RoCE guest as root.
# Usage: session_test.sh BUILT_PG_RDMA_SO SERVER_EXT_SOURCE_DIR PG_WIRE_PROBE
set -euo pipefail
so=$1 src=$2 probe=$3
here=$(dirname "$(readlink -f "$0")")
. "$here/../stage.sh"
. "$here/../../../regress/lib/providers.sh"
IP=${RXE_IP:?run in the Soft-RoCE guest}
DEV=${RXE_DEV:?run in the Soft-RoCE guest}
PORT=54340
work=$(mktemp -d /tmp/pg_rdma-session.XXXXXX)
data=$work/data
stop() { as_pg "$STAGE_BIN/pg_ctl" -D "$data" -m fast -t 30 stop >/dev/null 2>&1 || true; }
trap 'stop; rm -rf "$work"' EXIT
stage_install "$work" "$so" "$src"
as_pg "$STAGE_BIN/initdb" -D "$data" -A trust -U postgres --no-locale >/dev/null
# 127.0.0.1: a TCP address without RDMA (not in pg_rdma.listen_addresses).
printf '%s\n' "port = $PORT" "unix_socket_directories = '$work'" "listen_addresses = '127.0.0.1'" \
    "shared_preload_libraries = 'pg_rdma'" "pg_rdma.listen_addresses = '$IP'" \
    "log_connections = on" "log_disconnections = on" | as_pg tee -a "$data/postgresql.conf" >/dev/null
echo "host all all $IP/32 trust" | as_pg tee -a "$data/pg_hba.conf" >/dev/null
as_pg "$STAGE_BIN/pg_ctl" -D "$data" -l "$data/log" -w -t 60 start >/dev/null

fail() { echo "FAIL: $*"; cat "$data/log"; exit 1; }
sql() { as_pg "$STAGE_BIN/psql" -X -h "$work" -p "$PORT" -U postgres -d postgres -At "$@"; }
rdma() { "$probe" "$IP" "$PORT" postgres postgres "$@"; }
wait_for() {  # wait_for SECONDS CMD...: until CMD succeeds, SECONDS of wall time
    local until=$((SECONDS + $1)); shift
    while [ "$SECONDS" -lt "$until" ]; do "$@" && return 0; sleep 0.1; done
    "$@"
}
# running LIKE: the pid of the one backend whose query is LIKE that pattern.
running() { sql -c "select pid from pg_stat_activity where query like '$1'"; }
# sleeper LIKE: waits (30 s at most) for such a backend; sets $pid.
sleeper() {
    found() { pid=$(running "$1"); [ -n "$pid" ]; }
    wait_for 30 found "$1" || fail "no backend started '$1'"
}

sql -c 'create extension pg_rdma' >/dev/null
# The counters from here on (3b counts them).
sql -c 'select pg_stat_reset_rdma()' >/dev/null
started=$(sql -c 'select pg_postmaster_start_time()')

# 1. A session over RDMA: the view and the log say so, pg_hba saw the real
#    client address.
out=$(rdma "select transport, device, protocol_version, client_addr, inet_client_addr() from pg_stat_rdma where pid = pg_backend_pid()") ||
    fail "the RDMA session failed: $out"
[ "$out" = "rdma|$DEV|1|$IP|$IP" ] || fail "pg_stat_rdma for the RDMA session: '$out'"
grep -q "LOG:  pg_rdma: connection upgraded: with_rsocket=true host=$IP port=[0-9]* device=$DEV " "$data/log" ||
    fail "no with_rsocket=true log line"
disconnection_logged() {
    grep -q "LOG:  pg_rdma: disconnection: with_rsocket=true session time: [0-9:.]* host=$IP port=[0-9]* bytes_sent=[1-9][0-9]* bytes_received=[1-9]" \
        "$data/log"
}
wait_for 10 disconnection_logged || fail "no with_rsocket=true disconnection line with bytes"
echo "ok: a session over RDMA shows in pg_stat_rdma and the log"

# 1b. Its backend loaded the provider of the guest's rxe device and none of
#     the other providers rdma-core is configured with
#     (transport/provider_preload.hpp): each backend is a new process.
maps=$(rdma "select string_agg(distinct regexp_replace(l, '^[^/]*', ''), E'\n')
             from regexp_split_to_table(pg_read_file('/proc/self/maps'), E'\n') l where l like '%/%'") ||
    fail "reading the backend's mappings failed: $maps"
out=$(mapped_providers <<<"$maps") || fail "no providers to compare the backend's mappings against"
rxe_provider_alone "$out" || fail "providers mapped by the RDMA session's backend: '$out'"
echo "ok: the backend loaded rxe's provider alone"

# 2. The same address without the upgrade stays on TCP.
out=$(rdma --tcp "select transport from pg_stat_rdma where pid = pg_backend_pid()") || fail "TCP session: $out"
[ "$out" = tcp ] || fail "pg_stat_rdma for the TCP session: '$out'"
echo "ok: the same address serves TCP"

# 2b. Whether the client asked and, on TCP, why; who sees which row.
out=$(rdma "select requested, reason is null from pg_stat_rdma where pid = pg_backend_pid()") || fail "$out"
[ "$out" = "t|t" ] || fail "pg_stat_rdma's requested/reason for an RDMA session: '$out'"
out=$(rdma --tcp "select requested, reason is null from pg_stat_rdma where pid = pg_backend_pid()") || fail "$out"
[ "$out" = "f|t" ] || fail "pg_stat_rdma's requested/reason for a session that did not ask: '$out'"
out=$("$probe" 127.0.0.1 "$PORT" postgres postgres --prefer \
    "select transport, requested, reason from pg_stat_rdma where pid = pg_backend_pid()" 2>"$work/prefer.err") ||
    fail "a client asking on an address without RDMA: $out $(cat "$work/prefer.err")"
[ "$out" = "tcp|t|this address is not in pg_rdma.listen_addresses" ] ||
    fail "pg_stat_rdma for a client that asked on an address without RDMA: '$out'"
grep -q 'declined an RDMA upgrade from host=127.0.0.1 port=[0-9]*: this address is not in pg_rdma.listen_addresses' "$data/log" ||
    fail "no log line for the upgrade asked on an address without RDMA"
sql -c 'create role regress_rdma_user login' >/dev/null
rdma "select pg_sleep(30)" >"$work/other.out" 2>&1 &
other=$!
sleeper 'select pg_sleep(30)'
as_user() { "$probe" "$IP" "$PORT" regress_rdma_user postgres "$@"; }
# Its own row in full; the postgres session's row with its pid alone.
seen="select (select transport || '|' || device || '|' || (client_addr = inet_client_addr())::text
               from pg_stat_rdma where pid = pg_backend_pid()),
              (select coalesce(transport, 'hidden') || '|' || (client_addr is null)::text
               from pg_stat_rdma where pid = $pid)"
out=$(as_user "$seen") || fail "a plain role reading pg_stat_rdma: $out"
[ "$out" = "rdma|$DEV|true|hidden|true" ] || fail "a plain role sees in pg_stat_rdma: '$out'"
sql -c 'grant pg_read_all_stats to regress_rdma_user' >/dev/null
out=$(as_user "$seen") || fail "a pg_read_all_stats role reading pg_stat_rdma: $out"
[ "$out" = "rdma|$DEV|true|rdma|false" ] || fail "a pg_read_all_stats role sees in pg_stat_rdma: '$out'"
sql -c "select pg_cancel_backend($pid)" >/dev/null
wait "$other" 2>/dev/null || true
echo "ok: pg_stat_rdma says whether the client asked; a plain role sees its own row, another role's only by its pid, all of them with pg_read_all_stats"

# 3. Large results (the backend blocks in send and waits for EPOLLOUT) and
#    many queries in one session; counters are live.
out=$(rdma "select md5(string_agg(repeat(chr(65 + g % 26), 1000), '')) from generate_series(1, 20000) g") ||
    fail "large aggregate: $out"
expected=$(sql -c "select md5(string_agg(repeat(chr(65 + g % 26), 1000), '')) from generate_series(1, 20000) g")
[ "$out" = "$expected" ] || fail "the aggregate differs over RDMA: '$out' vs '$expected'"
rdma "select repeat('x', 4000000) from generate_series(1, 5)" \
     "select bytes_sent > 20000000 and bytes_received > 0 from pg_stat_rdma where pid = pg_backend_pid()" \
     >"$work/rows.out" || fail "large rows failed"
[ "$(wc -c <"$work/rows.out")" = $((5 * 4000001 + 2)) ] || fail "large rows arrived with $(wc -c <"$work/rows.out") bytes"
[ "$(tail -1 "$work/rows.out")" = t ] || fail "pg_stat_rdma's counters did not grow during the session"
big=$(rdma "select repeat('y', 30000000)" | wc -c) || fail "a 30 MB row failed"
[ "$big" = 30000001 ] || fail "a 30 MB row arrived with $big bytes"
echo "ok: large results over RDMA arrive whole; counters grow during the session"

# 3b. The cumulative counters: every session so far counted by how it
#     started, and the bytes of the RDMA sessions that ended under rxe0.
counted() { sql -c "select sessions from pg_stat_rdma_outcomes where outcome = '$1'"; }
[ "$(counted upgraded)" = 9 ] && [ "$(counted not_requested)" = 2 ] && [ "$(counted not_offered)" = 1 ] &&
    [ "$(sql -c 'select sum(sessions) from pg_stat_rdma_outcomes')" = 12 ] ||
    fail "pg_stat_rdma_outcomes after 9 RDMA sessions, 2 TCP ones and 1 asking on 127.0.0.1: $(sql -c 'select * from pg_stat_rdma_outcomes where sessions > 0')"
device_bytes() { [ "$(sql -c "select sessions = 9 and bytes_sent > 45000000 and bytes_received > 0 from pg_stat_rdma_devices where device = '$DEV'")" = t ]; }
wait_for 10 device_bytes || fail "pg_stat_rdma_devices: $(sql -c 'select * from pg_stat_rdma_devices')"
# Prometheus' postgres_exporter (Debian's) with conf/postgres_exporter.yml.
exporter_at=127.0.0.1:9188
as_pg env DATA_SOURCE_NAME="host=$work port=$PORT user=postgres dbname=postgres sslmode=disable" \
    prometheus-postgres-exporter --extend.query-path="$src/../conf/postgres_exporter.yml" --disable-default-metrics \
    --disable-settings-metrics --web.listen-address="$exporter_at" >"$work/exporter.log" 2>&1 &
stop_exporter() { pkill -f "web.listen-address=$exporter_at" 2>/dev/null || true; }
trap 'stop_exporter; stop; rm -rf "$work"' EXIT
scrape() {
    python3 -c "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen('http://$exporter_at/metrics', timeout=10).read().decode())" \
        >"$work/metrics" 2>/dev/null &&
        grep -q '^pg_rdma_outcomes_sessions{.*outcome="upgraded".*} [1-9]' "$work/metrics"
}
wait_for 60 scrape || fail "postgres_exporter with conf/postgres_exporter.yml: $(grep pg_rdma "$work/metrics"; cat "$work/exporter.log")"
grep -q "^pg_rdma_devices_bytes_sent{.*device=\"$DEV\".*} [1-9]" "$work/metrics" ||
    fail "postgres_exporter has no bytes for $DEV: $(grep pg_rdma_devices "$work/metrics")"
stop_exporter
echo "ok: postgres_exporter exports them with conf/postgres_exporter.yml: $(grep -c '^pg_rdma_' "$work/metrics") series"
echo "ok: pg_stat_rdma_outcomes and pg_stat_rdma_devices count the sessions and their bytes: $(sql -c "select string_agg(outcome || '=' || sessions, ' ') from pg_stat_rdma_outcomes where sessions > 0"); $(sql -c "select device || ': ' || sessions || ' sessions, ' || bytes_sent || ' bytes sent' from pg_stat_rdma_devices")"

# 4. An idle client (no call into the transport for 25 s, longer than the
#    keepalive timeout) keeps its session, and the idle backend sleeps.
rdma --sleep-ms 25000 "select pg_backend_pid()" "select 'still here'" >"$work/idle.out" 2>&1 &
idle=$!
for _ in $(seq 100); do [ -s "$work/idle.out" ] && break; sleep 0.1; done
pid=$(head -1 "$work/idle.out")
[ -n "$pid" ] || fail "the idle client did not start"
sleep 2
t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
sleep 10
t1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
wait "$idle" || fail "the idle session failed: $(cat "$work/idle.out")"
[ "$(tail -1 "$work/idle.out")" = "still here" ] || fail "the idle session: $(cat "$work/idle.out")"
# clock ticks (1/100 s): an idle backend may wake for keepalive, never spin.
[ $((t1 - t0)) -le 20 ] || fail "an idle RDMA backend used $((t1 - t0)) ticks of CPU in 10 s"
echo "ok: an idle session lives on; its backend used $((t1 - t0))/1000 ticks of CPU in 10 s"

# 5. pg_terminate_backend delivers its FATAL to the RDMA client, and the
#    postmaster does not restart.
rdma "select pg_sleep(60)" >"$work/term.out" 2>&1 &
victim=$!
sleeper 'select pg_sleep(60)'
[ "$(sql -c "select transport from pg_stat_rdma where pid = $pid")" = rdma ] || fail "the victim is not on RDMA"
sql -c "select pg_terminate_backend($pid)" >/dev/null
wait "$victim" && fail "the terminated session exited 0"
grep -q 'FATAL: terminating connection due to administrator command' "$work/term.out" ||
    fail "the RDMA client did not get the FATAL: $(cat "$work/term.out")"
[ "$(sql -c 'select pg_postmaster_start_time()')" = "$started" ] || fail "the postmaster restarted"
echo "ok: pg_terminate_backend reaches the RDMA client; the postmaster lives on"

# 6. pg_cancel_backend cancels a query on an RDMA session; the session goes on.
rdma "select pg_sleep(60)" "select 'after cancel'" >"$work/cancel.out" 2>&1 &
victim=$!
sleeper 'select pg_sleep(60)'
sql -c "select pg_cancel_backend($pid)" >/dev/null
wait "$victim" && rc=0 || rc=$?
[ "$rc" = 1 ] || fail "the cancelled session ended with $rc: $(cat "$work/cancel.out")"
grep -q 'ERROR: canceling statement due to user request' "$work/cancel.out" || fail "no cancel error: $(cat "$work/cancel.out")"
[ "$(tail -1 "$work/cancel.out")" = "after cancel" ] || fail "the session did not go on after the cancel"
echo "ok: pg_cancel_backend cancels a query on an RDMA session"

# 7. A client killed mid-query: its backend notices and exits cleanly. As
#    on TCP, a backend in pg_sleep does not look at its client: it notices
#    when it sends the result of the 20 s query (or by keepalive, whichever
#    comes first), so the bound covers the query.
failed=$(counted failed)
rdma "select pg_sleep(3)" "select pg_sleep(20)" >/dev/null 2>&1 &
victim=$!
sleeper 'select pg_sleep(%'
kill -9 "$victim"; wait "$victim" 2>/dev/null || true
gone() { [ -z "$(sql -c "select pid from pg_stat_activity where pid = $pid")" ]; }
wait_for 90 gone || fail "the backend of a killed client is still there"
[ "$(sql -c 'select pg_postmaster_start_time()')" = "$started" ] || fail "the postmaster restarted"
# A client that went, not an RDMA failure: not counted as one.
[ "$(counted failed)" = "$failed" ] ||
    fail "the killed client counted as an RDMA failure: $(sql -c "select string_agg(outcome || '=' || sessions, ' ') from pg_stat_rdma_outcomes where sessions > 0")"
echo "ok: the backend of a SIGKILLed RDMA client exits, not counted as an RDMA failure; the postmaster lives on"

grep -q 'server process .* was terminated\|terminated by signal' "$data/log" && fail "a backend crashed"
echo "ok: no backend crashed"

# 8. A TCP client from a link-local IPv6 address on a pg_rdma address: its
#    row's client_addr has no zone ("fe80::99%rxenet0" is not a valid inet,
#    and one such row used to make every read of pg_stat_rdma fail).
NETDEV=${RXE_NETDEV:?run in the Soft-RoCE guest}
LINK_LOCAL=fe80::99
ip -6 addr add "$LINK_LOCAL/64" dev "$NETDEV" nodad
stop
as_pg sed -i "s/^pg_rdma.listen_addresses = .*/pg_rdma.listen_addresses = '*'/" "$data/postgresql.conf"
echo "host all all fe80::/10 trust" | as_pg tee -a "$data/pg_hba.conf" >/dev/null
as_pg "$STAGE_BIN/pg_ctl" -D "$data" -l "$data/log" -w -t 60 start >/dev/null
as_pg "$STAGE_BIN/psql" -X -h "$LINK_LOCAL%$NETDEV" -p "$PORT" -U postgres -d postgres -At \
    -c 'select pg_sleep(30)' >/dev/null 2>&1 &
linked=$!
has_row() { [ "$(sql -c "select count(*) from pg_stat_rdma where client_addr = '$LINK_LOCAL'")" = 1 ]; }
wait_for 30 has_row || fail "no valid pg_stat_rdma row for the link-local client: $(sql -c 'select * from pg_stat_rdma' 2>&1)"
kill "$linked" 2>/dev/null; wait "$linked" 2>/dev/null || true
ip -6 addr del "$LINK_LOCAL/64" dev "$NETDEV" || true
echo "ok: a link-local IPv6 client gets a valid pg_stat_rdma row (its zone dropped)"
