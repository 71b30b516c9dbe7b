#!/usr/bin/env bash
# PostgreSQL sessions over RDMA, whole product: real psql / pgbench through
# the built pgrdma wrapper (libpq_rdma.so), a real PostgreSQL 15 with the
# built pg_rdma, real RDMA (Soft-RoCE guest). Each check asks the server
# which transport the session used (pg_stat_rdma, its log).
# Usage: sessions_test.sh BUILD_DIR
set -euo pipefail
build=$1
IP=${RXE_IP:?run in the Soft-RoCE guest}
# shellcheck source=regress/pg/cluster.sh
. "$(dirname "$(readlink -f "$0")")/../cluster.sh"
pgrdma=$build/libclient/pgrdma
PG_CLUSTER_PORT=54410
# The server waits for a session's RDMA setup as long as the clients do
# (pg_cluster_client's PGCONNECT_TIMEOUT, all of which a require client
# gives its RDMA setup): 64 setups at once on the guest's emulated CPUs can
# outlast the 10 s default. connect_timeout may be half of
# authentication_timeout at most.
setup_s=${PGCONNECT_TIMEOUT:-$PG_CLUSTER_TIMEOUT}
pg_cluster_init "$(mktemp -d /tmp/pg_rdma-sessions.XXXXXX)" "$build" "max_connections = 100" \
    "pg_rdma.connect_timeout = ${setup_s}s" "authentication_timeout = $((2 * setup_s))s"
pg_cluster_make_certs
# A reject line for one role at the client's real address, ahead of the sample's lines.
as_pg sed -i "1i host all reject_me $IP/32 reject" "$PG_CLUSTER_DATA/pg_hba.conf"
pg_cluster_start
pg_cluster_set_password app secret
pg_cluster_set_password reject_me secret
pg_cluster_psql -c 'create extension pg_rdma' -c 'grant pg_read_all_stats to app' >/dev/null
# shellcheck source=regress/pg/session_test_lib.sh
. "$(dirname "$(readlink -f "$0")")/../session_test_lib.sh"
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# wakeups PID: the times the process has been switched out (voluntary and
# not): counted by the guest's kernel, so, unlike CPU time, not inflated
# when the emulator's threads lose the host's CPU.
wakeups() { awk '/ctxt_switches/ { s += $2 } END { print s }' "/proc/$1/status"; }

# 1. TLS over RDMA: sslmode=require and verify-ca with the test's certificates.
for mode in require verify-ca; do
    out=$(rpsql "sslmode=$mode" -c "select ssl, ($me) from pg_stat_ssl where pid = pg_backend_pid()") ||
        fail "sslmode=$mode over RDMA"
    [ "$out" = "t|rdma" ] || fail "sslmode=$mode: pg_stat_ssl/pg_stat_rdma say '$out'"
done
# A COPY out over TLS: PostgreSQL's full buffers are TLS records, joined
# like plain ones (MSG_MORE); the stream must decrypt to the same bytes.
tls_gen="copy (select g, repeat(md5(g::text), 8) from generate_series(1, 20000) g) to stdout"
rpsql "sslmode=require" -c "$tls_gen" -c "select ssl, ($me) from pg_stat_ssl where pid = pg_backend_pid()" \
    >"$work/tls.out" || fail "COPY out over TLS over RDMA"
[ "$(tail -n 1 "$work/tls.out")" = "t|rdma" ] || fail "the TLS COPY session was not TLS on RDMA: $(tail -n 1 "$work/tls.out")"
[ "$(head -n -1 "$work/tls.out" | md5sum)" = "$(pg_cluster_psql -c "$tls_gen" | md5sum)" ] ||
    fail "COPY out over TLS over RDMA differs from the local socket's"
echo "ok: sslmode=require and verify-ca over RDMA (pg_stat_ssl: ssl, pg_stat_rdma: rdma); COPY out over TLS intact"

# 2. pg_hba sees the client's real address over RDMA; a FATAL at
#    authentication reaches the RDMA client.
out=$(PGUSER=reject_me rpsql "" -c 'select 1' 2>&1) && fail "the hba reject line let reject_me in"
grep -q "pg_hba.conf rejects connection for host \"$IP\", user \"reject_me\"" <<<"$out" ||
    fail "the reject did not reach the client: $out"
grep -q "pg_rdma: connection upgraded: with_rsocket=true host=$IP" "$log" || fail "no upgraded session in the log"
out=$(PGPASSWORD=wrong PGPASSFILE=/dev/null PGUSER=app pg_cluster_client "$pgrdma" psql -X -At \
          -d "dbname=postgres with_rsocket=require" -c 'select 1' 2>&1) && fail "a wrong password was accepted"
grep -q 'password authentication failed for user "app"' <<<"$out" || fail "the auth FATAL did not reach the client: $out"
[ "$(grep -c 'pg_rdma: connection upgraded' "$log")" -ge 4 ] || fail "the rejected sessions were not on RDMA"
echo "ok: an hba reject line and a wrong scram password reach the RDMA client as FATALs"

# 3. COPY of >= 100 MB out and in over RDMA; checksums equal to the local socket's.
gen="copy (select g, repeat(md5(g::text), 8) from generate_series(1, 400000) g) to stdout"
rpsql "" -c "$gen" >"$work/copy.rdma" || fail "COPY out over RDMA"
pg_cluster_psql -c "$gen" >"$work/copy.local"
size=$(stat -c %s "$work/copy.rdma")
[ "$size" -ge 100000000 ] || fail "COPY out moved only $size bytes"
cmp -s "$work/copy.rdma" "$work/copy.local" || fail "COPY out over RDMA differs from the local socket's"
pg_cluster_psql -c 'create table copied (g int, t text)' -c 'grant all on copied to app' >/dev/null
chmod 644 "$work/copy.rdma"
rpsql "" -c "\\copy copied from '$work/copy.rdma'" >/dev/null || fail "COPY in over RDMA"
pg_cluster_psql -c 'copy (select * from copied order by g) to stdout' >"$work/copy.back"
cmp -s "$work/copy.back" "$work/copy.local" || fail "COPY in over RDMA stored something else"
echo "ok: COPY out and in over RDMA, $size bytes each way, checksums equal"

# 3b. Full output buffers sent in the middle of a query reach the client
#     while the backend then waits (pg_sleep), as over TCP: pg_rdma joins
#     them into larger writes (MSG_MORE) but sends them before an epoll wait.
#     40 rows of 1 KB fill PostgreSQL's 8 KiB buffer four times; the rest
#     stays in that buffer until the query ends, on either transport.
slow="copy (select repeat('z', 1000) from generate_series(1, 40) union all select pg_sleep(120)::text) to stdout"
rpsql "" -c "$slow" >"$work/slow.out" 2>&1 &
victim=$!
arrived() { [ "$(stat -c %s "$work/slow.out")" -ge 16384 ]; }
wait_for 60 arrived || fail "only $(stat -c %s "$work/slow.out") bytes of the rows before pg_sleep reached the client"
pg_cluster_psql -c "select pg_cancel_backend(pid) from pg_stat_activity where query like 'copy (select repeat(%'" >/dev/null
wait "$victim" && fail "the cancelled COPY exited 0"
grep -q 'canceling statement due to user request' "$work/slow.out" || fail "the COPY was not cancelled"
echo "ok: rows sent before a wait reach the RDMA client during the wait"

# 4. pg_terminate_backend of a psql RDMA session delivers its message.
rpsql "" -c 'select pg_sleep(60)' >"$work/term.out" 2>&1 &
victim=$!
has_sleeper() { [ -n "$(pg_cluster_psql -c "select pid from pg_stat_activity where query = 'select pg_sleep(60)'")" ]; }
wait_for 30 has_sleeper || fail "the session to terminate did not start"
pid=$(pg_cluster_psql -c "select pid from pg_stat_activity where query = 'select pg_sleep(60)'")
[ "$(pg_cluster_psql -c "select transport from pg_stat_rdma where pid = $pid")" = rdma ] || fail "not on RDMA"
pg_cluster_psql -c "select pg_terminate_backend($pid)" >/dev/null
wait "$victim" && fail "the terminated psql exited 0"
grep -q 'terminating connection due to administrator command' "$work/term.out" ||
    fail "psql did not get the FATAL: $(cat "$work/term.out")"
postmaster_unchanged
echo "ok: pg_terminate_backend's message reaches psql over RDMA; the postmaster lives on"

# 5. client_connection_check_interval on an RDMA session: a live client is
#    left alone; a killed one is noticed while its query still runs.
opts="options='-c client_connection_check_interval=200ms'"
[ "$(rpsql "$opts" -c 'select pg_sleep(2)' -c "$me" | tail -1)" = rdma ] ||
    fail "client_connection_check_interval broke a live RDMA session"
# The victim's query names this test: pkill sees the whole guest, where
# another lane's test may run a pg_sleep(60) of its own.
victim_sql='select pg_sleep(60) as sessions_test_victim'
rpsql "$opts" -c "$victim_sql" >/dev/null 2>&1 &
victim=$!
victim_backend() { pg_cluster_psql -c "select pid from pg_stat_activity where query = '$victim_sql'"; }
has_victim() { [ -n "$(victim_backend)" ]; }
wait_for 30 has_victim || fail "the session to kill did not start"
pid=$(victim_backend)
# SIGKILL to psql itself (the job is runuser/env around it).
pkill -9 -x -f '(.*/)?psql .*sessions_test_victim' || pkill -9 -f 'sessions_test_victim' || fail "no psql to kill"
wait "$victim" 2>/dev/null || true
gone() { [ -z "$(pg_cluster_psql -c "select pid from pg_stat_activity where pid = $pid")" ]; }
wait_for 20 gone || fail "the backend of a killed client still runs its query"
postmaster_unchanged
echo "ok: client_connection_check_interval works on RDMA sessions (live client kept, killed one noticed)"

# 6. An idle psql session (waiting at its prompt): its backend sleeps.
# psql waits at its prompt (stdin a pipe that stays open) until we close it.
mkfifo "$work/idle.fifo"
chmod 666 "$work/idle.fifo"
client psql -X -d "dbname=postgres application_name=idle_probe with_rsocket=require" \
    <"$work/idle.fifo" >/dev/null 2>&1 &
idle=$!
exec 9>"$work/idle.fifo"
idle_backend() { pg_cluster_psql -c "select a.pid from pg_stat_activity a join pg_stat_rdma r using (pid)
                                     where r.transport = 'rdma' and a.state = 'idle' and a.application_name = 'idle_probe'"; }
has_idle() { [ -n "$(idle_backend)" ]; }
wait_for 30 has_idle || fail "the idle psql session did not start"
pid=$(idle_backend | head -1)
# Asleep: few wakeups (the keepalive's, every 2 s each way; a backend that
# polled on a short timer would wake hundreds of times) and little CPU (a
# spinning one would use all 1000 ticks). The CPU bound leaves room for the
# guest's clock, which counts time the host took from the emulator as the
# backend's (12 and 33 ticks seen here on a loaded host, 1-5 on a quiet one).
readonly IDLE_S=10 IDLE_MAX_WAKEUPS=60 IDLE_MAX_TICKS=100
t0=$(cpu_ticks "$pid"); w0=$(wakeups "$pid"); sleep "$IDLE_S"; t1=$(cpu_ticks "$pid"); w1=$(wakeups "$pid")
[ $((w1 - w0)) -le "$IDLE_MAX_WAKEUPS" ] ||
    fail "an idle RDMA backend woke $((w1 - w0)) times in $IDLE_S s (it used $((t1 - t0)) CPU ticks)"
[ $((t1 - t0)) -le "$IDLE_MAX_TICKS" ] || fail "an idle RDMA backend used $((t1 - t0)) ticks (1/100 s) of CPU in $IDLE_S s"
exec 9>&-   # EOF: psql ends the session
wait "$idle" || true
echo "ok: an idle psql session's backend woke $((w1 - w0)) times and used $((t1 - t0)) CPU ticks (1/100 s) in $IDLE_S s"

# 7. pgbench, 8 clients on 2 threads, over RDMA: no failed transaction, and
#    pg_stat_rdma shows the 8 sessions on rdma while it runs.
pg_cluster_psql -c 'grant all on schema public to app' >/dev/null
PGUSER=app pg_cluster_client "$PG_CLUSTER_BIN/pgbench" -i -q -s 2 -h "$PG_CLUSTER_WORK" >/dev/null 2>&1 ||
    fail "pgbench -i"
client pgbench -c 8 -j 2 -T 20 -n "dbname=postgres with_rsocket=require" >"$work/pgbench.out" 2>&1 &
bench=$!
rdma_bench() { pg_cluster_psql -c "select count(*) from pg_stat_rdma r join pg_stat_activity a using (pid)
                                   where r.transport = 'rdma' and a.application_name = 'pgbench'"; }
eight() { [ "$(rdma_bench)" = 8 ]; }
wait_for 20 eight || fail "pg_stat_rdma showed $(rdma_bench) pgbench sessions on rdma, not 8"
wait "$bench" || fail "pgbench failed: $(cat "$work/pgbench.out")"
grep -q '^number of transactions actually processed: [1-9]' "$work/pgbench.out" &&
    grep -q '^number of failed transactions: 0 ' "$work/pgbench.out" || fail "pgbench: $(cat "$work/pgbench.out")"
echo "ok: pgbench -c 8 -j 2 -T 20 over RDMA: $(grep -E '^tps' "$work/pgbench.out" | head -1)"

# 8. 64 concurrent psql sessions over RDMA. Each waits in a query until all
#    64 are seen at once, then pg_cancel_backend ends the waits. (psql
#    itself, not Debian's perl wrapper: 64 perl start-ups under TCG take
#    longer than the sessions would wait.)
many_pids=()
for i in $(seq 64); do
    client "$PG_CLUSTER_BIN/psql" -X -At -d "dbname=postgres with_rsocket=require" \
        -c "$me" -c 'select pg_sleep(300)' >"$work/many.$i" 2>&1 &
    many_pids+=($!)
done
# The sessions whose psql has already ended, with what it printed: a count
# short of 64 is then either a session still on its way or one that failed.
ended() {
    for i in $(seq 64); do
        kill -0 "${many_pids[i - 1]}" 2>/dev/null || echo "session $i: $(tr '\n' ' ' <"$work/many.$i")"
    done
}
many() { pg_cluster_psql -c "select count(*) from pg_stat_rdma r join pg_stat_activity a using (pid)
                             where r.transport = 'rdma' and a.query = 'select pg_sleep(300)'"; }
sixty_four() { [ "$(many)" -ge 64 ] 2>/dev/null; }
wait_for 240 sixty_four ||
    fail "only $(many 2>&1) concurrent RDMA sessions, not 64; backends: $(pg_cluster_psql -c "select backend_type, state, count(*) from pg_stat_activity group by 1, 2" 2>&1 | tr '\n' ' '); ended early: $(ended); the server's failed upgrades: $(grep -E 'pg_rdma: (RDMA not possible|RDMA upgrade failed)' "$log" | tail -n 3 | tr '\n' ' ')"
pg_cluster_psql -c "select count(pg_cancel_backend(pid)) from pg_stat_activity where query = 'select pg_sleep(300)'" \
    >/dev/null
wait
for i in $(seq 64); do
    [ "$(head -1 "$work/many.$i")" = rdma ] || fail "session $i: $(cat "$work/many.$i")"
    grep -q 'canceling statement due to user request' "$work/many.$i" || fail "session $i was not cancelled: $(cat "$work/many.$i")"
done
postmaster_unchanged
grep -q 'terminated by signal' "$log" && fail "a backend crashed"
echo "ok: 64 concurrent psql sessions over RDMA, all cancelled by pg_cancel_backend; no backend crashed"
