#!/usr/bin/env bash
# `pgrdma proxy` in the Soft-RoCE guest, in front of a real PostgreSQL 15
# with the built pg_rdma. Its clients are plain psql and pgbench without
# pg_rdma, as a Go program's or a static binary's would be: they reach the
# proxy on a Unix socket (host=DIR, PostgreSQL's socket name) or a loopback
# port, and the proxy carries each session to the server over RDMA (the
# server's pg_stat_rdma says so). Checked: a transaction, 10 MB COPY out
# and in, pipelined pgbench clients, TLS through it (verify-ca), a cancel
# (its CancelRequest stays on TCP), pg_terminate_backend reaching the
# client, the fallback to TCP (WITH_RSOCKET=true) and the refusal under
# require, said to the client in an ErrorResponse it prints (also to one
# that asked for TLS first); a server that is not there; --max-connections;
# many short sessions leaving the proxy with the descriptors it started
# with; SIGTERM (no longer listening, the open session served to its end,
# the socket file removed), a second signal or --drain-timeout cutting it
# (the server's backend ends); the socket's mode (other users cannot
# connect); a stale socket file taken over, a live one or a running
# PostgreSQL's not; the program run without the library, or with a
# WITH_RSOCKET the library would ignore, refused.
# Usage: proxy_test.sh PGRDMA BUILD_DIR PROXY_PROGRAM
set -euo pipefail
pgrdma=$1 build=$2 proxy_program=$3
IP=${RXE_IP:?run in the Soft-RoCE guest}
here=$(dirname "$(readlink -f "$0")")
# shellcheck source=regress/pg/cluster.sh
. "$here/../../../regress/pg/cluster.sh"
# shellcheck source=regress/pg/client_checks.sh
. "$here/../../../regress/pg/client_checks.sh"

readonly PROXY_PORT=6481 FALLBACK_PORT=6482 REQUIRE_PORT=6483 NOSERVER_PORT=6484 LIMITED_PORT=6485
readonly CUT_PORT=6486 DRAIN_PORT=6487
readonly NO_SERVER_PORT=54999  # nothing listens there
readonly SHORT_SESSIONS=40
# The pg_rdma server: RDMA on the rxe address; 127.0.0.1 is a pg_rdma
# address too, with no device behind it.
PG_CLUSTER_PORT=54481
pg_cluster_up_for_clients proxy "$build"
log=$(pg_cluster_log)
work=$PG_CLUSTER_WORK
# (No TLS unless a step asks for it: the server offers it.)
export PGPASSWORD=secret PGUSER=postgres PGDATABASE=postgres PGCONNECT_TIMEOUT=30 PGSSLMODE=disable

proxies=()  # "NAME PID"
stop_proxies() {
    local entry
    for entry in "${proxies[@]}"; do kill -KILL "${entry#* }" 2>/dev/null || true; done
}
trap 'stop_proxies; pg_cluster_cleanup' EXIT

fail() {
    echo "FAIL: $*"
    echo "--- server log:"; tail -20 "$log"
    for f in "$work"/proxy*.err; do [ ! -s "$f" ] || { echo "--- $f:"; tail -20 "$f"; }; done
    exit 1
}

# start_proxy NAME POLICY ARG...: the proxy, its stderr in NAME.err; waits
# for its "listening" line. PROXY_PID is its pid (env and pgrdma exec it).
start_proxy() {
    local name=$1 policy=$2
    shift 2
    env WITH_RSOCKET="$policy" "$pgrdma" proxy "$@" \
        </dev/null 2>"$work/$name.err" &
    PROXY_PID=$!
    proxies+=("$name $PROXY_PID")
    wait_for 60 grep -q '^pgrdma proxy: listening on' "$work/$name.err" ||
        fail "$name did not start: $(cat "$work/$name.err")"
}
# descriptors PID: open descriptors, leaving out the device's verbs context
# and event channel, which the RDMA libraries keep for the process's
# lifetime once the device was used.
descriptors() {
    local fd n=0
    for fd in "/proc/$1/fd"/*; do
        case $(readlink "$fd") in "/dev/infiniband/uverbs"* | "anon_inode:[infinibandevent]") ;; *) n=$((n + 1)) ;; esac
    done
    echo "$n"
}
# psql through the proxy: plain libpq, no pg_rdma.
through() { "$PG_CLUSTER_BIN/psql" -X -At -v ON_ERROR_STOP=1 "$@"; }
# The server's view of the session that runs it.
readonly MY_SESSION="select coalesce(r.transport, 'none') || ' ' || case when s.ssl then 't' else 'f' end
    from pg_stat_ssl s left join pg_stat_rdma r using (pid) where s.pid = pg_backend_pid()"

sockets=$work/proxy
mkdir "$sockets"
start_proxy proxy require --listen "$sockets" --listen "127.0.0.1:$PROXY_PORT" "$IP:$PG_CLUSTER_PORT"
main_pid=$PROXY_PID
[ -S "$sockets/.s.PGSQL.$PG_CLUSTER_PORT" ] || fail "no socket file $sockets/.s.PGSQL.$PG_CLUSTER_PORT"
[ "$(readlink "/proc/$main_pid/exe")" = "$(readlink -f "$proxy_program")" ] ||
    fail "process $main_pid is $(readlink "/proc/$main_pid/exe"), not the proxy (the checks of its descriptors and signals would miss it)"
fds0=$(descriptors "$main_pid")
[ "$(stat -c %a "$sockets/.s.PGSQL.$PG_CLUSTER_PORT")" = 700 ] ||
    fail "the socket's mode is $(stat -c %a "$sockets/.s.PGSQL.$PG_CLUSTER_PORT"), not 700"
chmod 755 "$sockets"  # the directory lets others in: the socket's own mode must stop them
if out=$(runuser -u postgres -- "$PG_CLUSTER_BIN/psql" -X -At -h "$sockets" -p "$PG_CLUSTER_PORT" -c 'select 1' 2>&1); then
    fail "another user connected through the proxy's 0700 socket: $out"
fi
grep -q 'Permission denied' <<<"$out" || fail "another user at the proxy's socket: $out"
unix=(-h "$sockets" -p "$PG_CLUSTER_PORT")
tcp=(-h 127.0.0.1 -p "$PROXY_PORT")

# 1. A transaction through the Unix socket, on RDMA.
[ "$(through "${unix[@]}" -c "$MY_SESSION")" = "rdma f" ] ||
    fail "a session through the proxy's Unix socket: $(through "${unix[@]}" -c "$MY_SESSION" 2>&1)"
got=$(through "${unix[@]}" <<'SQL'
begin;
create table proxied (i int primary key, t text);
insert into proxied select i, md5(i::text) from generate_series(1, 1000) i;
commit;
select count(*), sum(i) from proxied;
SQL
)
[ "$(tail -n 1 <<<"$got")" = "1000|500500" ] || fail "a transaction through the proxy: $got"
echo "ok: a session through the proxy's Unix socket runs on RDMA; a transaction commits"

# 2. 10 MB COPY out and in through the loopback port.
copy='copy (select i, repeat(md5(i::text), 16) from generate_series(1, 20000) i) to stdout'
want=$(pg_cluster_psql -c "$copy" | md5sum)
got=$(through "${tcp[@]}" -c "$copy" | md5sum)
[ "$got" = "$want" ] || fail "COPY out through the proxy differs ($got, want $want)"
pg_cluster_psql -c 'create table copied (i int, t text)' >/dev/null
pg_cluster_psql -c "$copy" | through "${tcp[@]}" -c 'copy copied from stdin' >/dev/null || fail "COPY in through the proxy"
[ "$(pg_cluster_psql -c "copy (select * from copied order by i) to stdout" | md5sum)" = "$want" ] ||
    fail "COPY in through the proxy stored other bytes"
echo "ok: 10 MB COPY out and in through the proxy's loopback port, the same bytes"

# 3. Pipelines: 8 pgbench clients, each sending 10 queries per pipeline.
{
    printf '%s\n' '\startpipeline'
    for i in $(seq 1 10); do echo "select $i, md5('$i');"; done
    printf '%s\n' '\endpipeline'
} >"$work/pipeline.sql"
out=$("$PG_CLUSTER_BIN/pgbench" -n -M extended -c 8 -j 2 -t 30 -f "$work/pipeline.sql" "${tcp[@]}" 2>&1) ||
    fail "pipelined pgbench through the proxy: $out"
grep -q 'number of transactions actually processed: 240/240' <<<"$out" || fail "pipelined pgbench: $out"
echo "ok: 8 pipelined pgbench clients through the proxy"

# 4. TLS passes through: the client verifies the server's certificate.
session=$(through -d "host=127.0.0.1 port=$PROXY_PORT dbname=postgres sslmode=verify-ca sslrootcert=$work/certs/ca.crt" \
    -c "$MY_SESSION") || fail "TLS through the proxy: $session"
[ "$session" = "rdma t" ] || fail "TLS through the proxy: the server says '$session'"
# verify-full: the name checked is the server's (host=), the address
# connected to the proxy's (hostaddr=).
session=$(through -d "host=$IP hostaddr=127.0.0.1 port=$PROXY_PORT dbname=postgres sslmode=verify-full sslrootcert=$work/certs/ca.crt" \
    -c "$MY_SESSION") || fail "TLS verify-full through the proxy: $session"
[ "$session" = "rdma t" ] || fail "TLS verify-full through the proxy: the server says '$session'"
echo "ok: TLS through the proxy (verify-ca, and verify-full with hostaddr=) on RDMA"

# 5. A cancel: psql's Ctrl-C sends a CancelRequest through the proxy on a
# fresh connection, which stays on TCP (it is not a session).
pg_check_cancel "$work/cancel.out" "${unix[@]}" || fail "a cancel through the proxy: $(cat "$work/cancel.out")"
echo "ok: a cancel through the proxy ends the query"

# 6. Many short sessions (pgbench -C: a connection per transaction), then
# the proxy holds the descriptors it held before any.
out=$("$PG_CLUSTER_BIN/pgbench" -n -C -M extended -c 4 -j 2 -t $((SHORT_SESSIONS / 4)) -f "$work/pipeline.sql" "${unix[@]}" 2>&1) ||
    fail "short sessions through the proxy: $out"
grep -q "number of transactions actually processed: $SHORT_SESSIONS/$SHORT_SESSIONS" <<<"$out" ||
    fail "short sessions through the proxy: $out"
same() { [ "$(descriptors "$main_pid")" = "$fds0" ]; }
wait_for 30 same || fail "after $SHORT_SESSIONS sessions the proxy holds $(descriptors "$main_pid") descriptors, $fds0 before: $(ls -l "/proc/$main_pid/fd")"
echo "ok: $SHORT_SESSIONS short sessions, then the proxy holds the $fds0 descriptors it started with"

# 7. Where the server's address has no device: WITH_RSOCKET=true carries
# the session over TCP (one warning on the proxy's stderr); require
# refuses it, and the client prints why.
start_proxy proxy_fallback true --listen "127.0.0.1:$FALLBACK_PORT" "127.0.0.1:$PG_CLUSTER_PORT"
[ "$(through -h 127.0.0.1 -p "$FALLBACK_PORT" -c "$MY_SESSION")" = "tcp f" ] || fail "the fallback through the proxy"
grep -q "WARNING:  with_rsocket: RDMA is not possible for server \"127.0.0.1\", port $PG_CLUSTER_PORT: .*; continuing over TCP" \
    "$work/proxy_fallback.err" || fail "the fallback said: $(cat "$work/proxy_fallback.err")"
start_proxy proxy_require require --listen "127.0.0.1:$REQUIRE_PORT" "127.0.0.1:$PG_CLUSTER_PORT"
if out=$(through -h 127.0.0.1 -p "$REQUIRE_PORT" -c 'select 1' 2>&1); then fail "require through the proxy connected: $out"; fi
grep -q 'FATAL:  pgrdma proxy: the server 127.0.0.1:'"$PG_CLUSTER_PORT"' cannot be reached over RDMA' <<<"$out" ||
    fail "require through the proxy: the client said: $out"
# A client that asks for TLS first (sslmode=prefer) reads it too: the
# proxy declines TLS, then answers its StartupMessage.
if out=$(through -d "host=127.0.0.1 port=$REQUIRE_PORT dbname=postgres sslmode=prefer" -c 'select 1' 2>&1); then
    fail "require through the proxy connected with sslmode=prefer: $out"
fi
grep -q 'FATAL:  pgrdma proxy: the server 127.0.0.1:'"$PG_CLUSTER_PORT"' cannot be reached over RDMA' <<<"$out" ||
    fail "require through the proxy, sslmode=prefer: the client said: $out"
grep -q "WARNING:  with_rsocket=require: RDMA is not possible for server \"127.0.0.1\"" "$work/proxy_require.err" ||
    fail "require through the proxy: its log: $(cat "$work/proxy_require.err")"
echo "ok: no device: true carries the session over TCP, saying why; require refuses it and the client reads why"

# 8. No server there: the client reads that the proxy could not connect.
start_proxy proxy_noserver true --listen "127.0.0.1:$NOSERVER_PORT" "127.0.0.1:$NO_SERVER_PORT"
if out=$(through -h 127.0.0.1 -p "$NOSERVER_PORT" -c 'select 1' 2>&1); then fail "no server: connected: $out"; fi
grep -q "pgrdma proxy: could not connect to the server 127.0.0.1:$NO_SERVER_PORT: Connection refused" <<<"$out" ||
    fail "no server: the client said: $out"
echo "ok: a server that is not there: the client reads that the proxy could not connect"

# 9. --max-connections: a second session while one is open is refused with
# PostgreSQL's SQLSTATE for it; the first is unharmed.
start_proxy proxy_limited require --max-connections 1 --listen "127.0.0.1:$LIMITED_PORT" "$IP:$PG_CLUSTER_PORT"
through -h 127.0.0.1 -p "$LIMITED_PORT" -c 'select pg_sleep(120)' >"$work/held.out" 2>&1 &
held=$!
held_open() { [ -n "$(pg_cluster_psql -c "select pid from pg_stat_activity where query = 'select pg_sleep(120)'")" ]; }
wait_for 60 held_open || fail "the held session never started: $(cat "$work/held.out")"
if out=$("$PG_CLUSTER_BIN/psql" -X -At -h 127.0.0.1 -p "$LIMITED_PORT" -c 'select 1' 2>&1); then
    fail "a second session past --max-connections 1 connected: $out"
fi
grep -q 'pgrdma proxy: too many connections' <<<"$out" || fail "past --max-connections, the client said: $out"
held_open || fail "the held session ended when the second was refused: $(cat "$work/held.out")"
echo "ok: past --max-connections the client reads 'too many connections'; the open session is unharmed"
# pg_terminate_backend reaches the client through the proxy.
pg_cluster_psql -c "select pg_terminate_backend(pid) from pg_stat_activity where query = 'select pg_sleep(120)'" >/dev/null
if wait "$held"; then fail "the terminated session's client succeeded: $(cat "$work/held.out")"; fi
grep -q 'terminating connection due to administrator command' "$work/held.out" ||
    fail "the terminated session's client said: $(cat "$work/held.out")"
echo "ok: pg_terminate_backend's message reaches the client through the proxy"

# 10. SIGTERM: the proxy stops listening and removes its socket file at
# once, serves the open session to its end, then exits 0.
through "${unix[@]}" -c "select pg_sleep(6), 'served'" >"$work/last.out" 2>&1 &
last=$!
last_open() { [ -n "$(pg_cluster_psql -c "select pid from pg_stat_activity where query like 'select pg_sleep(6)%'")" ]; }
wait_for 60 last_open || fail "the last session never started: $(cat "$work/last.out")"
kill -TERM "$main_pid"
gone() { [ ! -e "$sockets/.s.PGSQL.$PG_CLUSTER_PORT" ]; }
wait_for 10 gone || fail "after SIGTERM the socket file is still there"
if through "${tcp[@]}" -c 'select 1' >/dev/null 2>&1; then fail "after SIGTERM the proxy still accepts"; fi
kill -0 "$main_pid" 2>/dev/null || fail "after SIGTERM the proxy ended before its open session"
wait "$last" || fail "the open session after SIGTERM: $(cat "$work/last.out")"
grep -q '|served' "$work/last.out" || fail "the open session after SIGTERM: $(cat "$work/last.out")"
rc=0
wait "$main_pid" || rc=$?
[ "$rc" = 0 ] || fail "the proxy's exit status after SIGTERM: $rc"
echo "ok: SIGTERM: no longer listening, socket file removed, the open session served to its end, exit 0"

# A second signal cuts the open sessions: the proxy ends at once and the
# server sees the session end (its backend goes once its query has ended
# and it writes to the client, as with TCP).
start_proxy proxy_cut require --listen "127.0.0.1:$CUT_PORT" "$IP:$PG_CLUSTER_PORT"
cut_pid=$PROXY_PID
through -h 127.0.0.1 -p "$CUT_PORT" -c "select pg_sleep(10), 'cut'" >"$work/cut.out" 2>&1 &
cut_client=$!
cut_open() { [ -n "$(pg_cluster_psql -c "select pid from pg_stat_activity where query like 'select pg_sleep(10)%'")" ]; }
wait_for 60 cut_open || fail "the session to cut never started: $(cat "$work/cut.out")"
kill -TERM "$cut_pid"
wait_for 10 grep -q 'no longer listening' "$work/proxy_cut.err" || fail "the proxy to cut did not take the first SIGTERM"
kill -INT "$cut_pid"
rc=0
wait "$cut_pid" || rc=$?
[ "$rc" = 0 ] || fail "the proxy's exit status after a second signal: $rc"
if wait "$cut_client"; then fail "the cut session's client succeeded: $(cat "$work/cut.out")"; fi
not_cut_open() { ! cut_open; }
wait_for 60 not_cut_open || fail "60 s after the proxy cut it, the server still runs the session"
echo "ok: a second signal cuts the open session; the server's backend ends"

# --drain-timeout: after SIGTERM the proxy waits that long, then cuts.
start_proxy proxy_drain require --drain-timeout 3 --listen "127.0.0.1:$DRAIN_PORT" "$IP:$PG_CLUSTER_PORT"
drain_pid=$PROXY_PID
through -h 127.0.0.1 -p "$DRAIN_PORT" -c "select pg_sleep(10), 'cut'" >"$work/drain.out" 2>&1 &
drain_client=$!
wait_for 60 cut_open || fail "the session to drain never started: $(cat "$work/drain.out")"
kill -TERM "$drain_pid"
rc=0
wait "$drain_pid" || rc=$?
[ "$rc" = 0 ] && grep -q 'ended at --drain-timeout' "$work/proxy_drain.err" ||
    fail "the proxy at --drain-timeout: exit $rc: $(cat "$work/proxy_drain.err")"
if wait "$drain_client"; then fail "the session cut at --drain-timeout succeeded: $(cat "$work/drain.out")"; fi
wait_for 60 not_cut_open || fail "60 s after --drain-timeout, the server still runs the session"
echo "ok: --drain-timeout cuts the session left open after SIGTERM"

# 11. A socket file left by a proxy that was killed is taken over; one a
# live proxy answers on is not.
start_proxy proxy_killed require --listen "$sockets" "$IP:$PG_CLUSTER_PORT"
kill -KILL "$PROXY_PID"
wait "$PROXY_PID" 2>/dev/null || true
[ -S "$sockets/.s.PGSQL.$PG_CLUSTER_PORT" ] || fail "a killed proxy left no socket file (the check below would prove nothing)"
start_proxy proxy_again require --listen "$sockets" "$IP:$PG_CLUSTER_PORT"
[ "$(through "${unix[@]}" -c "$MY_SESSION")" = "rdma f" ] || fail "the proxy that took over a stale socket file"
rc=0
"$pgrdma" proxy --listen "$sockets" "$IP:$PG_CLUSTER_PORT" </dev/null >"$work/second.out" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q 'is in use' "$work/second.out" ||
    fail "a second proxy on a live socket file: exit $rc: $(cat "$work/second.out")"
# The running server's own socket (its directory and port): its lock file
# names a live postmaster.
rc=0
"$pgrdma" proxy --listen "$work" "$IP:$PG_CLUSTER_PORT" </dev/null >"$work/over_server.out" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "is in use: process $(head -n 1 "$PG_CLUSTER_DATA/postmaster.pid") holds" "$work/over_server.out" ||
    fail "a proxy on the server's own socket: exit $rc: $(cat "$work/over_server.out")"
[ -S "$work/.s.PGSQL.$PG_CLUSTER_PORT" ] && pg_cluster_psql -c 'select 1' >/dev/null ||
    fail "the server's own socket is gone after a proxy was refused on it"
echo "ok: a stale socket file is taken over; a live proxy's or a running server's is refused"

# 12. The program run without the library refuses to start (it would carry
# everything over TCP); a bad command line says what is wrong.
rc=0
"$proxy_program" --listen 6499 "$IP" >"$work/bare.out" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q 'libpq_rdma.so is not loaded' "$work/bare.out" || fail "the bare program: exit $rc: $(cat "$work/bare.out")"
rc=0
"$pgrdma" proxy --listen 0.0.0.0:6499 "$IP" >"$work/usage.out" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q 'loopback' "$work/usage.out" || fail "a listen address off loopback: exit $rc: $(cat "$work/usage.out")"
rc=0
WITH_RSOCKET=requrie "$pgrdma" proxy --listen 6499 "$IP" >"$work/policy.out" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q 'WITH_RSOCKET=requrie is not' "$work/policy.out" ||
    fail "a misspelt WITH_RSOCKET: exit $rc: $(cat "$work/policy.out")"
echo "ok: refused: the program without the library, a listen address off loopback, a misspelt WITH_RSOCKET"

# Every proxy's stderr holds only its own lines and the fallback's; no
# backend crashed.
# Expected: start-up lines, the steps' refusals and shutdowns, the
# library's fallback warnings for 127.0.0.1; nothing else (a "server's side
# failed" or a closed connection would show here).
unexpected=$(grep -hv -e '^pgrdma proxy: listening on' -e '^pgrdma proxy: note: clients do not negotiate TLS' \
    -e '^pgrdma proxy: connection [0-9]* from 127.0.0.1:[0-9]*: pgrdma proxy: \(the server 127.0.0.1:[0-9]* cannot be reached over RDMA\|could not connect to the server 127.0.0.1:[0-9]*: Connection refused\)' \
    -e '^pgrdma proxy: connection [0-9]* from 127.0.0.1:[0-9]*: refused: 1 sessions already open' \
    -e '^pgrdma proxy: no longer listening' -e '^pgrdma proxy: ended' \
    -e 'with_rsocket: RDMA is not possible for server "127.0.0.1"' \
    -e 'with_rsocket=require: RDMA is not possible for server "127.0.0.1"' "$work"/proxy*.err || true)
[ -z "$unexpected" ] || fail "the proxies' stderr: $unexpected"
if grep -E 'terminated by signal|was terminated' "$log"; then fail "a backend crashed"; fi
echo "PASS: proxy"
