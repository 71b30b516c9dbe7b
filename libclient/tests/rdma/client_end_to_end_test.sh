#!/usr/bin/env bash
# libpq_rdma.so end to end in the Soft-RoCE guest: real psql and libpq, a
# real PostgreSQL 15, real RDMA. Until the pg_rdma backend upgrades
# sessions, the RDMA side is stand_in_backend (TEST ONLY: a relay from the
# RDMA connection to PostgreSQL on loopback). The fallback cases talk to
# PostgreSQL directly, which has no pg_rdma.
# Usage: client_end_to_end_test.sh LIBPQ_RDMA_SO PQ_FORMS STAND_IN_BACKEND PGRDMA
set -euo pipefail
so=$1 forms=$2 stand_in=$3 pgrdma=$4
PGBIN=/usr/lib/postgresql/15/bin
IP=${RXE_IP:?run in the Soft-RoCE guest}
PG_PORT=54401 RELAY_PORT=54402 CLOSED_PORT=54403
work=$(mktemp -d /tmp/pg_rdma-client.XXXXXX)
chown postgres "$work"
as_pg() { runuser -u postgres -- "$@"; }
relay_pid=
cleanup() {
    [ -n "$relay_pid" ] && kill "$relay_pid" 2>/dev/null
    as_pg "$PGBIN/pg_ctl" -D "$work/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- stand-in log:"; cat "$work/relay.log" 2>/dev/null; echo "--- server log:"; tail -20 "$work/data/log"; exit 1; }

as_pg "$PGBIN/initdb" -D "$work/data" -A trust -U postgres >/dev/null
echo "host all all $IP/32 trust" >>"$work/data/pg_hba.conf"
as_pg "$PGBIN/pg_ctl" -D "$work/data" -l "$work/data/log" -w \
    -o "-c listen_addresses=127.0.0.1,$IP -p $PG_PORT -k $work" start >/dev/null
touch "$work/relay.log"
"$stand_in" "$IP" "$RELAY_PORT" "$PG_PORT" "$work/relay.log" >"$work/relay.out" &
relay_pid=$!
for _ in $(seq 100); do grep -q ready "$work/relay.out" 2>/dev/null && break; sleep 0.1; done

rdma="host=$IP port=$RELAY_PORT user=postgres dbname=postgres"
plain="host=$IP port=$PG_PORT user=postgres dbname=postgres"
# pq [ENV...] -- CMD...: runs CMD under the library, stdout to $out, stderr to $err.
run() { LD_PRELOAD=$so "$@" >"$work/out" 2>"$work/err"; }
out() { cat "$work/out"; }
err() { cat "$work/err"; }
last_session() { tail -1 "$work/relay.log"; }
sessions() { wc -l <"$work/relay.log"; }

# 1. psql (PQconnectdbParams, expand_dbname) over RDMA, each spelling.
for value in require true on yes 1 TRUE; do
    run psql -X -At "$rdma with_rsocket=$value" -c 'select 42' || fail "psql with_rsocket=$value: $(err)"
    [ "$(out)" = 42 ] || fail "psql with_rsocket=$value printed '$(out)'"
    [ "$(last_session)" = rdma ] || fail "with_rsocket=$value: the session was '$(last_session)', not rdma"
    [ ! -s "$work/err" ] || fail "with_rsocket=$value wrote to stderr: $(err)"
done
echo "ok: psql over RDMA (require, true, on, yes, 1, TRUE)"

# 2. Not asked: plain libpq, no upgrade request (the stand-in sees a startup packet).
for value in "" "with_rsocket=false" "with_rsocket=off"; do
    run psql -X -At "$rdma $value" -c 'select 42' || fail "psql '$value': $(err)"
    [ "$(out)" = 42 ] && [ "$(last_session)" = tcp ] || fail "'$value': got '$(out)' over '$(last_session)'"
    [ ! -s "$work/err" ] || fail "'$value' wrote to stderr: $(err)"
done
echo "ok: without with_rsocket (or false/off) psql stays on plain TCP and sends no upgrade request"

# 3. Every connection call, blocking and asynchronous (poll and select).
for form in connectdb connectdb_params setdblogin start_poll start_select start_epoll start_params_poll; do
    n=$(sessions)
    run "$forms" "$form" "$rdma with_rsocket=require" || fail "pq_forms $form: $(err)"
    grep -qx 42 "$work/out" || fail "pq_forms $form printed: $(out)"
    [ "$(sessions)" = $((n + 1)) ] && [ "$(last_session)" = rdma ] || fail "pq_forms $form: session '$(last_session)'"
    case $form in start_*)
        [ "$(grep -c '^pipelined' "$work/out")" = 3 ] || fail "pq_forms $form: pipelined queries: $(out)"
        echo "   $form: $(grep longest "$work/out")";;
    esac
done
echo "ok: PQconnectdb, PQconnectdbParams, PQsetdbLogin, PQconnectStart(Params) + PQconnectPoll (poll, select, epoll) over RDMA"

# 4. Data both ways: COPY out and in, checksums equal to plain TCP's.
gen="copy (select g, md5(g::text), repeat('y', g % 300) from generate_series(1, 100000) g) to stdout"
run psql -X -At "$rdma with_rsocket=require" -c "$gen" || fail "COPY out over RDMA: $(err)"
over_rdma=$(md5sum <"$work/out" | cut -d' ' -f1)
cp "$work/out" "$work/copy.data"
run psql -X -At "$plain" -c "$gen" || fail "COPY out over TCP: $(err)"
[ "$over_rdma" = "$(md5sum <"$work/out" | cut -d' ' -f1)" ] || fail "COPY out differs between RDMA and TCP"
run psql -X -At "$rdma with_rsocket=require" -c 'create table t (a int, b text, c text)' \
    -c '\copy t from '"$work/copy.data" \
    -c "select count(*), md5(string_agg(a || b || c, ',' order by a)) from t" || fail "COPY in over RDMA: $(err)"
expect=$(LD_PRELOAD= psql -X -At "$plain" -c "select count(*), md5(string_agg(g || md5(g::text) || repeat('y', g % 300), ',' order by g)) from generate_series(1, 100000) g")
grep -qx "$expect" "$work/out" || fail "COPY in over RDMA stored something else: $(out) vs $expect"
echo "ok: COPY out and in over RDMA ($(stat -c %s "$work/copy.data") bytes), checksums equal"

# 5. Several hosts: the first refuses, the second is upgraded.
run psql -X -At "host=$IP,$IP port=$CLOSED_PORT,$RELAY_PORT user=postgres dbname=postgres with_rsocket=require" \
    -c 'select 42' || fail "two hosts: $(err)"
[ "$(out)" = 42 ] && [ "$(last_session)" = rdma ] || fail "two hosts: '$(out)' over '$(last_session)'"
echo "ok: with several hosts the attempt that connects is upgraded"

# 6. Cancel (psql's SIGINT -> PQcancel) stays plain TCP and cancels the RDMA session's query.
n=$(sessions)
LD_PRELOAD=$so psql -X -At "$rdma with_rsocket=require" -c 'select pg_sleep(60)' >"$work/out" 2>"$work/err" &
psql_pid=$!
for _ in $(seq 100); do [ "$(sessions)" -gt "$n" ] && break; sleep 0.1; done
sleep 1
kill -INT "$psql_pid"
wait "$psql_pid" && fail "the cancelled query succeeded"
grep -q 'canceling statement due to user request' "$work/err" || fail "no cancel message: $(err)"
[ "$(tail -1 "$work/relay.log")" = tcp ] || fail "the cancel request was not plain TCP: $(last_session)"
echo "ok: PQcancel goes over plain TCP and cancels a query of an RDMA session"

# 7. A server without pg_rdma: true falls back with one warning; require fails clearly.
before=$(grep -c 'unsupported frontend protocol' "$work/data/log" || true)
run psql -X -At "$plain with_rsocket=true" -c 'select 42' || fail "fallback with true: $(err)"
[ "$(out)" = 42 ] || fail "fallback with true printed '$(out)'"
[ "$(grep -c . "$work/err")" = 1 ] && grep -q '^WARNING:  with_rsocket: RDMA is not possible for server' "$work/err" ||
    fail "fallback with true: expected one warning line, got: $(err)"
echo "   true:    $(err)"
run psql -X -At "$plain with_rsocket=require" -c 'select 42' && fail "require succeeded against a server without pg_rdma"
grep -q 'with_rsocket=require: RDMA is not possible: .*does not support RDMA' "$work/err" ||
    fail "require: unclear message: $(err)"
echo "   require: $(tr '\n' ' ' <"$work/err")"
after=$(grep -c 'unsupported frontend protocol' "$work/data/log" || true)
[ "$after" = $((before + 2)) ] || fail "the server saw $((after - before)) upgrade requests, expected 2"
run psql -X -At "$plain" -c 'select 42' || fail "plain: $(err)"
[ "$(grep -c 'unsupported frontend protocol' "$work/data/log")" = "$after" ] ||
    fail "without with_rsocket an upgrade request reached the server"
echo "ok: against PostgreSQL without pg_rdma, true falls back with one warning, require fails clearly"

# 8. An invalid value fails like libpq's own bad values, before connecting.
run psql -X -At "$rdma with_rsocket=maybe" -c 'select 42' && fail "with_rsocket=maybe connected"
grep -qx 'psql: error: invalid with_rsocket value: "maybe"' "$work/err" || fail "invalid value: $(err)"
run "$forms" start_poll "$rdma with_rsocket=" && fail "with_rsocket= connected"
grep -qx 'invalid with_rsocket value: ""' "$work/err" || fail "empty value via PQconnectStart: $(err)"
echo "ok: invalid values fail with libpq's wording"

# 9. The pgrdma wrapper.
out=$("$pgrdma" psql -X -At "$rdma with_rsocket=require" -c 'select 42') || fail "pgrdma psql failed"
[ "$out" = 42 ] && [ "$(last_session)" = rdma ] || fail "pgrdma psql: '$out' over '$(last_session)'"
out=$(LD_PRELOAD=/nonexistent-first.so "$pgrdma" sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
case $out in *libpq_rdma.so*/nonexistent-first.so) ;; *) fail "pgrdma did not prepend to LD_PRELOAD: $out";; esac
echo "ok: pgrdma runs a program with the library"
