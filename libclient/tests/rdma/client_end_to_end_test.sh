#!/usr/bin/env bash
# libpq_rdma.so end to end in the Soft-RoCE guest: real psql and libpq, a
# real PostgreSQL 15 with the built pg_rdma (regress/pg/cluster.sh), real
# RDMA. Which transport a session used is what the server says: its
# pg_stat_rdma row, or its log line (pg_rdma: connection upgraded /
# connection on TCP). The fallback cases also talk to a second cluster
# without pg_rdma.
# Usage: client_end_to_end_test.sh LIBPQ_RDMA_SO PQ_FORMS PGRDMA BUILD_DIR PQ_FORMS_LINKED
#            BUNDLED_MODULE BUNDLED_LOADER
set -euo pipefail
so=$1 forms=$2 pgrdma=$3 build=$4 forms_linked=$5 bundled_module=$6 bundled_loader=$7
IP=${RXE_IP:?run in the Soft-RoCE guest}
# shellcheck source=regress/pg/cluster.sh
. "$(dirname "$(readlink -f "$0")")/../../../regress/pg/cluster.sh"
# shellcheck source=regress/lib/providers.sh
. "$(dirname "$(readlink -f "$0")")/../../../regress/lib/providers.sh"
CLOSED_PORT=54403

# The cluster without pg_rdma (same staged binaries, nothing preloaded).
PG_CLUSTER_PORT=54401
pg_cluster_init "$(mktemp -d /tmp/pg_rdma-client-plain.XXXXXX)" "$build" \
    "shared_preload_libraries = ''" "listen_addresses = '$IP'"
pg_cluster_start
pg_cluster_set_password postgres secret
plain_work=$PG_CLUSTER_WORK
plain_log=$(pg_cluster_log)
# The pg_rdma cluster: on the rxe address (RDMA and TCP) and on 127.0.0.1,
# where this backend cannot get an RDMA device.
PG_CLUSTER_PORT=54402
pg_cluster_init "$(mktemp -d /tmp/pg_rdma-client.XXXXXX)" "$build" \
    "pg_rdma.listen_addresses = '$IP,127.0.0.1'" "log_connections = on"
echo "host all all 127.0.0.1/32 scram-sha-256" | as_pg tee -a "$PG_CLUSTER_DATA/pg_hba.conf" >/dev/null
pg_cluster_start
pg_cluster_set_password postgres secret
pg_cluster_psql -c 'create extension pg_rdma' >/dev/null
log=$(pg_cluster_log)
# Both clusters' passwords, for clients run as root.
cat "$plain_work/pgpass" "$PG_CLUSTER_WORK/pgpass" >/tmp/pg_rdma-client.pgpass
chmod 600 /tmp/pg_rdma-client.pgpass
export PGPASSFILE=/tmp/pg_rdma-client.pgpass
work=$PG_CLUSTER_WORK

fail() { echo "FAIL: $*"; echo "--- server log:"; tail -30 "$log"; exit 1; }

rdma="host=$IP port=54402 user=postgres dbname=postgres"
plain="host=$IP port=54401 user=postgres dbname=postgres"
no_device="host=127.0.0.1 port=54402 user=postgres dbname=postgres"
# run CMD...: runs CMD under the library, stdout to $work/out, stderr to $work/err.
run() { LD_PRELOAD=$so "$@" >"$work/out" 2>"$work/err"; }
out() { cat "$work/out"; }
err() { cat "$work/err"; }
# The transport of the pg_rdma cluster's last session, and how many it had.
session_lines() { grep -E 'pg_rdma: connection (upgraded|on TCP)' "$log" || true; }
last_session() { session_lines | tail -1 | grep -q 'connection upgraded' && echo rdma || echo tcp; }
sessions() { session_lines | wc -l; }
# Sessions the backend declined for want of a device (7b), so far.
declines() { pg_cluster_psql -c "select sessions from pg_stat_rdma_outcomes where outcome = 'no_device'"; }
transport_query="select transport from pg_stat_rdma where pid = pg_backend_pid()"
# rdma_said ATTRIBUTE: what pq_forms printed of PQrdmaAttribute (libpq-rdma.h).
rdma_said() { sed -n "s/^rdma $1: //p" "$work/out"; }
# on_rdma_said REQUESTED: pq_forms's connection says it is on RDMA, on the
# guest's device, as REQUESTED asked.
on_rdma_said() {
    grep -qx 'rdma in use: 1' "$work/out" && [ "$(rdma_said transport)" = rdma ] &&
        [ "$(rdma_said device)" = "$RXE_DEV" ] && [ "$(rdma_said requested)" = "$1" ] &&
        [ "$(rdma_said reason)" = '(null)' ]
}

# 1. psql (PQconnectdbParams, expand_dbname) over RDMA, each spelling.
for value in require true on yes 1 TRUE; do
    run psql -X -At "$rdma with_rsocket=$value" -c "$transport_query" || fail "psql with_rsocket=$value: $(err)"
    [ "$(out)" = rdma ] || fail "psql with_rsocket=$value: pg_stat_rdma says '$(out)'"
    [ "$(last_session)" = rdma ] || fail "with_rsocket=$value: the log says '$(last_session)', not rdma"
    [ ! -s "$work/err" ] || fail "with_rsocket=$value wrote to stderr: $(err)"
done
echo "ok: psql over RDMA (require, true, on, yes, 1, TRUE)"

# 1b. psql loaded the provider of the guest's rxe device and none of the
#     other providers rdma-core is configured with
#     (transport/provider_preload.hpp). Its \! shell's parent is psql.
run psql -X -At "$rdma with_rsocket=require" -c '\! awk "{ print \$NF }" /proc/$PPID/maps | sort -u' ||
    fail "psql listing its mappings: $(err)"
mapped=$(mapped_providers <"$work/out") || fail "no providers to compare psql's mappings against"
rxe_provider_alone "$mapped" || fail "providers mapped by psql over RDMA: '$mapped'"
echo "ok: psql loaded rxe's provider alone"

# 2. Not asked: plain libpq, no upgrade request (the backend sees a startup packet).
for value in "" "with_rsocket=false" "with_rsocket=off"; do
    run psql -X -At "$rdma $value" -c "$transport_query" || fail "psql '$value': $(err)"
    [ "$(out)" = tcp ] && [ "$(last_session)" = tcp ] || fail "'$value': pg_stat_rdma '$(out)', log '$(last_session)'"
    [ ! -s "$work/err" ] || fail "'$value' wrote to stderr: $(err)"
done
echo "ok: without with_rsocket (or false/off) psql stays on plain TCP and sends no upgrade request"

# 3. Every connection call, blocking and asynchronous (poll and select).
for form in connectdb connectdb_params setdblogin start_poll start_select start_epoll start_params_poll; do
    n=$(sessions)
    run "$forms" "$form" "$rdma with_rsocket=require" || fail "pq_forms $form: $(err)"
    grep -qx 42 "$work/out" || fail "pq_forms $form printed: $(out)"
    [ "$(sessions)" = $((n + 1)) ] && [ "$(last_session)" = rdma ] || fail "pq_forms $form: session '$(last_session)'"
    on_rdma_said require || fail "pq_forms $form: PQrdmaInUse/PQrdmaAttribute said: $(grep '^rdma' "$work/out")"
    case $form in start_*)
        [ "$(grep -c '^pipelined' "$work/out")" = 3 ] || fail "pq_forms $form: pipelined queries: $(out)"
        echo "   $form: $(grep longest "$work/out")";;
    esac
done
echo "ok: PQconnectdb, PQconnectdbParams, PQsetdbLogin, PQconnectStart(Params) + PQconnectPoll (poll, select, epoll) over RDMA; PQrdmaInUse and PQrdmaAttribute say so, with the device"

# 3a. What the library tells a program of a connection not on RDMA: not
# asked for, and a fallback with the warning's reason.
run "$forms" connectdb "$rdma with_rsocket=false" || fail "pq_forms with_rsocket=false: $(err)"
grep -qx 'rdma in use: 0' "$work/out" && [ "$(rdma_said transport)" = tcp ] && [ "$(rdma_said requested)" = false ] &&
    [ "$(rdma_said device)" = '(null)' ] && [ "$(rdma_said reason)" = 'not asked for: with_rsocket is false or not set' ] ||
    fail "pq_forms with_rsocket=false: $(grep '^rdma' "$work/out")"
run "$forms" start_poll "$no_device with_rsocket=on" || fail "pq_forms with no device: $(err)"
warned=$(sed -n 's/^WARNING:  with_rsocket: RDMA is not possible for server "127.0.0.1", port 54402: \(.*\); continuing over TCP$/\1/p' "$work/err")
[ -n "$warned" ] || fail "pq_forms with no device warned: $(err)"
grep -qx 'rdma in use: 0' "$work/out" && [ "$(rdma_said transport)" = tcp ] && [ "$(rdma_said requested)" = on ] &&
    [ "$(rdma_said reason)" = "$warned" ] || fail "pq_forms with no device: $(grep '^rdma' "$work/out") (warned: $warned)"
run "$forms" connectdb "host=$PG_CLUSTER_WORK port=54402 user=postgres dbname=postgres with_rsocket=true" ||
    fail "pq_forms over a Unix-domain socket: $(err)"
grep -qx 'rdma in use: 0' "$work/out" && [ "$(rdma_said transport)" = unix ] ||
    fail "pq_forms over a Unix-domain socket: $(grep '^rdma' "$work/out")"
echo "ok: PQrdmaAttribute says why a connection is not on RDMA (not asked for; the fallback's reason: $warned; a Unix-domain socket)"
# The server's side of the same: the row says the client asked, and why it
# is on TCP; the counters name the cause, once for this session.
counted_no_device() { pg_cluster_psql -c "select sessions from pg_stat_rdma_outcomes where outcome = 'no_device'"; }
before=$(counted_no_device)
run psql -X -At "$no_device with_rsocket=true" -c "select requested, reason from pg_stat_rdma where pid = pg_backend_pid()" ||
    fail "psql with no device: $(err)"
grep -q '^t|.*device' "$work/out" || fail "pg_stat_rdma's row of a session with no device: $(out)"
[ "$(counted_no_device)" = $((before + 1)) ] ||
    fail "pg_stat_rdma_outcomes counts $(counted_no_device) no_device, $before before: $(pg_cluster_psql -c 'select * from pg_stat_rdma_outcomes where sessions > 0')"
echo "ok: pg_stat_rdma gives the reason of a session on TCP ($(cut -d'|' -f2 "$work/out")); pg_stat_rdma_outcomes counts it"

# 3b. An application linked with libpq_rdma ahead of libpq, no LD_PRELOAD.
readelf -d "$forms_linked" | grep -q 'NEEDED.*libpq_rdma' || fail "pq_forms_linked does not link libpq_rdma"
for form in connectdb start_poll; do
    n=$(sessions)
    LD_PRELOAD= "$forms_linked" "$form" "$rdma with_rsocket=require" >"$work/out" 2>"$work/err" ||
        fail "linked pq_forms $form: $(err)"
    grep -qx 42 "$work/out" && [ "$(sessions)" = $((n + 1)) ] && [ "$(last_session)" = rdma ] && on_rdma_said require ||
        fail "linked pq_forms $form: '$(out)' over '$(last_session)'"
done
echo "ok: an application linked with libpq_rdma ahead of libpq gets RDMA without preloading"

# 3c. A program whose libpq is a renamed private copy (a binary wheel's):
# linked directly, and inside a module loaded with RTLD_LOCAL.
# shellcheck source=libclient/tests/bundled/rename_libpq.sh
. "$(dirname "$(readlink -f "$0")")/../bundled/rename_libpq.sh"
rename_libpq "$work/bundled" "$forms" "$bundled_module" || fail "could not make the renamed libpq copy"
for cmd in "$work/bundled/forms connectdb" "$work/bundled/forms start_epoll" "$bundled_loader $work/bundled/lib/module.so"; do
    n=$(sessions)
    run $cmd "$rdma with_rsocket=require" || fail "$cmd on $RENAMED_LIBPQ: $(err)"
    grep -qx 42 "$work/out" && [ "$(sessions)" = $((n + 1)) ] && [ "$(last_session)" = rdma ] ||
        fail "$cmd on $RENAMED_LIBPQ: '$(out)' over '$(last_session)'"
    n=$(declines)
    run $cmd "$no_device with_rsocket=true" || fail "$cmd on $RENAMED_LIBPQ, no device: $(err)"
    grep -qx 42 "$work/out" && [ "$(declines)" = $((n + 1)) ] ||
        fail "$cmd on $RENAMED_LIBPQ, no device: '$(out)', $(declines) decline(s) logged, before $n"
done
echo "ok: a renamed private libpq (linked, and in an RTLD_LOCAL module) gets RDMA, and TCP where there is no device"

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
expect=$(psql -X -At "$plain" -c "select count(*), md5(string_agg(g || md5(g::text) || repeat('y', g % 300), ',' order by g)) from generate_series(1, 100000) g")
grep -qx "$expect" "$work/out" || fail "COPY in over RDMA stored something else: $(out) vs $expect"
echo "ok: COPY out and in over RDMA ($(stat -c %s "$work/copy.data") bytes), checksums equal"

# 5. Several hosts: the first refuses, the second is upgraded.
run psql -X -At "host=$IP,$IP port=$CLOSED_PORT,54402 user=postgres dbname=postgres with_rsocket=require" \
    -c "$transport_query" || fail "two hosts: $(err)"
[ "$(out)" = rdma ] || fail "two hosts: pg_stat_rdma says '$(out)'"
echo "ok: with several hosts the attempt that connects is upgraded"

# 6. Cancel (psql's SIGINT -> PQcancel) stays plain TCP and cancels the RDMA session's query.
LD_PRELOAD=$so psql -X -At "$rdma with_rsocket=require" -c 'select pg_sleep(60)' >"$work/out" 2>"$work/err" &
psql_pid=$!
# SIGINT only once the query runs: psql has its cancel handler and the
# backend is inside pg_sleep, however slow the guest is today. Asked over
# the pg_rdma cluster's Unix socket: no password round.
sleeping() {
    [ "$(pg_cluster_psql -c "select count(*) from pg_stat_activity where query = 'select pg_sleep(60)' and state = 'active'")" = 1 ]
}
wait_for 30 sleeping || fail "the query to cancel never ran: $(err)"
kill -INT "$psql_pid"
wait "$psql_pid" && fail "the cancelled query succeeded"
grep -q 'canceling statement due to user request' "$work/err" || fail "no cancel message: $(err)"
# The cancel's connection is the server's last one: plain TCP, and no
# session of pg_rdma's (no upgrade, no line of ours for its port).
cancel_port=$(grep -o 'connection received: host=[^ ]* port=[0-9]*' "$log" | tail -1 | sed 's/.*port=//')
[ -n "$cancel_port" ] || fail "the cancel request's connection is not in the server log"
grep -q "pg_rdma: .*port=$cancel_port\b" "$log" &&
    fail "the cancel request was taken for a pg_rdma session: $(grep "port=$cancel_port\b" "$log")"
echo "ok: PQcancel goes over plain TCP and cancels a query of an RDMA session"

# 7. A server without pg_rdma: true falls back with one warning; require fails clearly.
before=$(grep -c 'unsupported frontend protocol' "$plain_log" || true)
run psql -X -At "$plain with_rsocket=true" -c 'select 42' || fail "fallback with true: $(err)"
[ "$(out)" = 42 ] || fail "fallback with true printed '$(out)'"
[ "$(grep -c . "$work/err")" = 1 ] && grep -q '^WARNING:  with_rsocket: RDMA is not possible for server' "$work/err" ||
    fail "fallback with true: expected one warning line, got: $(err)"
echo "   true:    $(err)"
run psql -X -At "$plain with_rsocket=require" -c 'select 42' && fail "require succeeded against a server without pg_rdma"
grep -q 'with_rsocket=require: RDMA is not possible: .*does not support RDMA' "$work/err" ||
    fail "require: unclear message: $(err)"
echo "   require: $(tr '\n' ' ' <"$work/err")"
after=$(grep -c 'unsupported frontend protocol' "$plain_log" || true)
[ "$after" = $((before + 2)) ] || fail "the server saw $((after - before)) upgrade requests, expected 2"
run psql -X -At "$plain" -c 'select 42' || fail "plain: $(err)"
[ "$(grep -c 'unsupported frontend protocol' "$plain_log")" = "$after" ] ||
    fail "without with_rsocket an upgrade request reached the server"
echo "ok: against PostgreSQL without pg_rdma, true falls back with one warning, require fails clearly"

# 7b. A pg_rdma backend that cannot get an RDMA device (127.0.0.1 is in
#     pg_rdma.listen_addresses, but no device serves it): it declines and
#     says why in its log; true continues on TCP with one warning, require
#     fails with the reason.
run psql -X -At "$no_device with_rsocket=true" -c "$transport_query" || fail "no device, true: $(err)"
[ "$(out)" = tcp ] || fail "no device, true: pg_stat_rdma says '$(out)'"
[ "$(grep -c . "$work/err")" = 1 ] || fail "no device, true: expected one warning line, got: $(err)"
echo "   true:    $(err)"
grep -q 'LOG:  pg_rdma: RDMA not possible for host=127.0.0.1 port=[0-9]*; the session continues on TCP' "$log" &&
    grep -q 'DETAIL:  .*127.0.0.1.*device' "$log" || fail "the backend did not log why it declined"
run psql -X -At "$no_device with_rsocket=require" -c 'select 42' && fail "require succeeded without a device"
grep -q 'with_rsocket=require: RDMA is not possible: ' "$work/err" || fail "no device, require: unclear message: $(err)"
echo "   require: $(tr '\n' ' ' <"$work/err")"
echo "ok: a pg_rdma backend without a device declines with its reason logged; true falls back, require fails"

# 8. An invalid value fails like libpq's own bad values, before connecting.
run psql -X -At "$rdma with_rsocket=maybe" -c 'select 42' && fail "with_rsocket=maybe connected"
grep -qx 'psql: error: invalid with_rsocket value: "maybe"' "$work/err" || fail "invalid value: $(err)"
run "$forms" start_poll "$rdma with_rsocket=" && fail "with_rsocket= connected"
grep -qx 'invalid with_rsocket value: ""' "$work/err" || fail "empty value via PQconnectStart: $(err)"
echo "ok: invalid values fail with libpq's wording"

# 8b. Other places a connection is written (the rest comes with the next
#     issue): a URI query parameter, percent-encoded too, and a multi-host
#     URI; the environment variable WITH_RSOCKET, which the connection's own
#     value beats; an invalid value in each.
uri="postgresql://postgres@$IP:54402/postgres"
for query in "with_rsocket=require" "with%5Frsocket=%72equire" "sslmode=disable&with_rsocket=true"; do
    run psql -X -At "$uri?$query" -c "$transport_query" || fail "URI ?$query: $(err)"
    [ "$(out)" = rdma ] || fail "URI ?$query: pg_stat_rdma says '$(out)'"
done
run psql -X -At "postgresql://postgres@$IP:$CLOSED_PORT,$IP:54402/postgres?with_rsocket=require" \
    -c "$transport_query" || fail "multi-host URI: $(err)"
[ "$(out)" = rdma ] || fail "multi-host URI: pg_stat_rdma says '$(out)'"
WITH_RSOCKET=require run psql -X -At "$rdma" -c "$transport_query" || fail "WITH_RSOCKET=require: $(err)"
[ "$(out)" = rdma ] || fail "WITH_RSOCKET=require: pg_stat_rdma says '$(out)'"
WITH_RSOCKET=require run psql -X -At "$rdma with_rsocket=false" -c "$transport_query" ||
    fail "with_rsocket=false under WITH_RSOCKET=require: $(err)"
[ "$(out)" = tcp ] || fail "with_rsocket=false did not beat WITH_RSOCKET: pg_stat_rdma says '$(out)'"
run psql -X -At "$uri?with_rsocket=maybe" -c 'select 42' && fail "?with_rsocket=maybe connected"
grep -qx 'psql: error: invalid with_rsocket value: "maybe"' "$work/err" || fail "invalid value in a URI: $(err)"
WITH_RSOCKET=maybe run psql -X -At "$rdma" -c 'select 42' && fail "WITH_RSOCKET=maybe connected"
grep -q 'invalid .*"maybe"' "$work/err" || fail "invalid WITH_RSOCKET: $(err)"
echo "ok: with_rsocket in a URI (percent-encoded, several hosts) and in WITH_RSOCKET; invalid values refused"

# 9. The pgrdma wrapper.
out=$("$pgrdma" psql -X -At "$rdma with_rsocket=require" -c "$transport_query") || fail "pgrdma psql failed"
[ "$out" = rdma ] || fail "pgrdma psql: pg_stat_rdma says '$out'"
out=$(LD_PRELOAD=/nonexistent-first.so "$pgrdma" sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
case $out in *libpq_rdma.so*/nonexistent-first.so) ;; *) fail "pgrdma did not prepend to LD_PRELOAD: $out";; esac
echo "ok: pgrdma runs a program with the library"

# 10. Last, as it costs the cluster a crash restart: the server vanishes
#     under an event loop whose other descriptor is ready on every
#     epoll_wait. The disconnect reaches the loop all the same (it lies
#     inside the connection's descriptor, beside a readable neighbour).
LD_PRELOAD=$so "$forms" busy_neighbour "$rdma with_rsocket=require" >"$work/out" 2>"$work/err" &
waiter=$!
for _ in $(seq 100); do grep -q '^waiting' "$work/out" && break; sleep 0.1; done
victim=$(sed -n 's/^backend //p' "$work/out")
[ -n "$victim" ] && grep -q '^waiting' "$work/out" || { kill "$waiter"; fail "busy_neighbour did not start: $(err)"; }
kill -9 "$victim"
wait "$waiter" || fail "busy_neighbour: $(err)"
grep -q '^connection lost' "$work/out" || fail "busy_neighbour printed: $(out)"
echo "ok: a server that vanishes is reported to an epoll loop whose other descriptor is always ready"
