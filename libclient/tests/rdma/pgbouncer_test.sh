#!/usr/bin/env bash
# A connection pooler in front of PostgreSQL, in the Soft-RoCE guest:
# Debian's pgbouncer run under pgrdma, whose connections to the server (made
# by libevent on non-blocking sockets, written with send()) are upgraded at
# their first write as the servers file says, against a real PostgreSQL 15
# with the built pg_rdma. Its clients are plain psql and pgbench over TCP on
# 127.0.0.1, without pg_rdma. Checked: pgbench's transactions in
# transaction-pooling mode, a large COPY, a cancel (pgbouncer sends it on a
# fresh server connection, which stays on TCP), server-side TLS over RDMA,
# and the fallback to TCP where the server's address has no device; which
# transport each server connection uses is what the server's pg_stat_rdma
# says. Once its server connections are closed, pgbouncer holds no more
# descriptors than before it had any.
# Usage: pgbouncer_test.sh PGRDMA BUILD_DIR
set -euo pipefail
pgrdma=$1 build=$2
IP=${RXE_IP:?run in the Soft-RoCE guest}
here=$(dirname "$(readlink -f "$0")")
# shellcheck source=regress/pg/cluster.sh
. "$here/../../../regress/pg/cluster.sh"
# shellcheck source=regress/pg/client_checks.sh
. "$here/../../../regress/pg/client_checks.sh"
command -v pgbouncer >/dev/null ||
    { echo "FAIL: Debian's pgbouncer is not installed (scripts/test installs it: scripts/lib/deps.sh)"; exit 1; }

readonly BOUNCER_PORT=6471 BOUNCER_TLS_PORT=6472
readonly CLIENTS=16 TRANSACTIONS=25 POOL=4
# The pg_rdma server: RDMA on the rxe address; 127.0.0.1 is a pg_rdma
# address too, with no device behind it.
PG_CLUSTER_PORT=54471
pg_cluster_up_for_clients pgbouncer "$build"
log=$(pg_cluster_log)
work=$PG_CLUSTER_WORK
bouncers=()  # their names; each writes WORK/NAME.pid
bouncer_pid() { cat "$work/$1.pid" 2>/dev/null; }
stop_bouncers() {
    local name
    for name in "${bouncers[@]}"; do kill -INT "$(bouncer_pid "$name")" 2>/dev/null || true; done
}
trap 'stop_bouncers; pg_cluster_cleanup' EXIT

fail() {
    echo "FAIL: $*"
    echo "--- server log:"; tail -20 "$log"
    for f in "$work"/bouncer*.err "$work"/bouncer*.log; do [ ! -s "$f" ] || { echo "--- $f:"; tail -20 "$f"; }; done
    exit 1
}

# The servers file: RDMA required to the rxe address; to 127.0.0.1 tried.
servers=$work/servers.conf
printf '%s %s require\n127.0.0.1 * true\n' "$IP" "$PG_CLUSTER_PORT" | as_pg tee "$servers" >/dev/null
# pgbouncer's own password for the server (SCRAM from the plain password);
# its clients are trusted on 127.0.0.1.
echo '"postgres" "secret"' | as_pg tee "$work/userlist.txt" >/dev/null

# start_bouncer NAME PORT [SETTING...]: pgbouncer under pgrdma, in the
# foreground as postgres (it refuses root); our lines on its stderr
# (NAME.err), its own log in NAME.log.
start_bouncer() {
    local name=$1 port=$2
    shift 2
    {
        echo '[databases]'
        echo "rdma = host=$IP port=$PG_CLUSTER_PORT dbname=postgres"
        echo "nodevice = host=127.0.0.1 port=$PG_CLUSTER_PORT dbname=postgres"
        echo '[pgbouncer]'
        echo "listen_addr = 127.0.0.1"
        echo "listen_port = $port"
        echo "unix_socket_dir ="
        echo "auth_type = trust"
        echo "auth_file = $work/userlist.txt"
        echo "pool_mode = transaction"
        echo "default_pool_size = $POOL"
        echo "max_client_conn = 100"
        echo "admin_users = postgres"
        echo "logfile = $work/$name.log"
        echo "pidfile = $work/$name.pid"
        printf '%s\n' "$@"
    } | as_pg tee "$work/$name.ini" >/dev/null
    as_pg env -u WITH_RSOCKET PGRDMA_SERVERS_FILE="$servers" "$pgrdma" pgbouncer -q "$work/$name.ini" \
        </dev/null 2>"$work/$name.err" &
    bouncers+=("$name")
    wait_for 60 bash -c "ss -Hltn 'sport = :$port' | grep -q ." || fail "$name did not listen on $port"
    [ -n "$(bouncer_pid "$name")" ] || fail "$name wrote no pid file"
    # Its descriptors before any server connection: they must come back
    # to this once its server connections are closed.
    descriptors "$name" >"$work/$name.fds0"
}
# descriptors NAME: how many descriptors pgbouncer NAME holds, leaving out
# the device's verbs context and its event channel, which the RDMA
# libraries keep for the process's lifetime once the device was used.
descriptors() {
    local fd n=0
    for fd in "/proc/$(bouncer_pid "$1")/fd"/*; do
        case $(readlink "$fd") in "/dev/infiniband/uverbs"* | "anon_inode:[infinibandevent]") ;; *) n=$((n + 1)) ;; esac
    done
    echo "$n"
}
# through PORT DB PSQL_ARG...: plain psql (no pg_rdma) through pgbouncer,
# which trusts its clients on 127.0.0.1.
through() {
    local port=$1 db=$2
    shift 2
    "$PG_CLUSTER_BIN/psql" -X -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d "$db" "$@"
}
# server_conns SQL_FILTER: "on_rdma total" over the server's client backends
# that came from ADDRESS (pgbouncer's connections), by pg_stat_rdma.
server_conns() {
    pg_cluster_psql -F ' ' -c "select count(*) filter (where r.transport = 'rdma'), count(*)
        from pg_stat_activity a left join pg_stat_rdma r using (pid) left join pg_stat_ssl s using (pid)
        where a.backend_type = 'client backend' and a.pid <> pg_backend_pid() and $1"
}

# 1. Transaction pooling: pgbench's TPC-B through pgbouncer, CLIENTS clients
# sharing POOL server connections, all of them over RDMA.
start_bouncer bouncer "$BOUNCER_PORT"
as_pg "$PG_CLUSTER_BIN/pgbench" -i -q -s 1 -h "$work" -p "$PG_CLUSTER_PORT" -U postgres postgres >/dev/null 2>&1 ||
    fail "pgbench -i"
out=$(as_pg "$PG_CLUSTER_BIN/pgbench" -n -c "$CLIENTS" -j 2 -t "$TRANSACTIONS" -h 127.0.0.1 -p "$BOUNCER_PORT" \
    -U postgres rdma 2>&1) || fail "pgbench through pgbouncer: $out"
grep -q "number of transactions actually processed: $((CLIENTS * TRANSACTIONS))/$((CLIENTS * TRANSACTIONS))" \
    <<<"$out" || fail "pgbench through pgbouncer: $out"
grep -q 'number of failed transactions: 0 ' <<<"$out" || fail "pgbench through pgbouncer: $out"
read -r on_rdma total <<<"$(server_conns "a.client_addr = '$IP'")"
[ "$total" -ge 1 ] && [ "$total" -le "$POOL" ] && [ "$on_rdma" = "$total" ] ||
    fail "pgbouncer's server connections: $on_rdma of $total on RDMA (pool of $POOL)"
echo "ok: pgbench through pgbouncer, $CLIENTS clients x $TRANSACTIONS transactions, on $total pooled server connection(s), all over RDMA (${SECONDS}s)"

# 2. A large result: COPY out through pgbouncer equals the server's own.
copy='copy (select i, repeat(md5(i::text), 16) from generate_series(1, 20000) i) to stdout'
want=$(pg_cluster_psql -c "$copy" | md5sum)
got=$(through "$BOUNCER_PORT" rdma -c "$copy" | md5sum)
[ "$got" = "$want" ] || fail "COPY through pgbouncer differs ($got, want $want)"
echo "ok: a 10 MB COPY out through pgbouncer, the same bytes"

# 3. A cancel: psql's Ctrl-C goes to pgbouncer, which sends a CancelRequest
# to the server on a fresh connection (left on TCP: it is not a session).
pg_check_cancel "$work/cancel.out" -h 127.0.0.1 -p "$BOUNCER_PORT" -U postgres -d rdma ||
    fail "a cancel through pgbouncer: $(cat "$work/cancel.out")"
through "$BOUNCER_PORT" rdma -c 'select 1' >/dev/null || fail "pgbouncer after a cancel"
echo "ok: a cancel through pgbouncer ends the query"

# 4. TLS between pgbouncer and the server, over RDMA.
start_bouncer bouncer_tls "$BOUNCER_TLS_PORT" "server_tls_sslmode = verify-ca" \
    "server_tls_ca_file = $work/certs/ca.crt"
[ "$(through "$BOUNCER_TLS_PORT" rdma -c 'select ssl from pg_stat_ssl where pid = pg_backend_pid()')" = t ] ||
    fail "pgbouncer's server connection is not on TLS"
read -r on_rdma total <<<"$(server_conns "a.client_addr = '$IP' and s.ssl")"
[ "$total" -ge 1 ] && [ "$on_rdma" = "$total" ] || fail "pgbouncer's TLS server connections: $on_rdma of $total on RDMA"
echo "ok: pgbouncer's server connection with TLS (verify-ca) over RDMA"

# 5. Where the server's address has no device, the rule's true falls back
# to TCP with one line on pgbouncer's stderr; its clients notice nothing.
[ "$(through "$BOUNCER_PORT" nodevice -c 'select 42')" = 42 ] || fail "pgbouncer to 127.0.0.1"
read -r on_rdma total <<<"$(server_conns "a.client_addr = '127.0.0.1'")"
[ "$total" -ge 1 ] && [ "$on_rdma" = 0 ] || fail "pgbouncer's server connections to 127.0.0.1: $on_rdma of $total on RDMA"
[ "$(grep -c "WARNING:  with_rsocket: RDMA is not possible for server \"127.0.0.1\", port $PG_CLUSTER_PORT: .*; continuing over TCP" \
    "$work/bouncer.err")" = 1 ] || fail "pgbouncer's fallback said: $(cat "$work/bouncer.err")"
echo "ok: pgbouncer's server connection falls back to TCP where there is no device, saying so once"

# 6. Its server connections closed (the admin console's RECONNECT), each
# pgbouncer holds the descriptors it held before it had any: a session
# that outlived its close would keep ~7 and its pinned memory.
for port in "$BOUNCER_PORT" "$BOUNCER_TLS_PORT"; do
    through "$port" pgbouncer -c 'RECONNECT' >/dev/null || fail "RECONNECT on $port"
done
no_server_conns() { [ "$(server_conns "a.client_addr in ('$IP', '127.0.0.1')" | cut -d' ' -f2)" = 0 ]; }
wait_for 60 no_server_conns || fail "pgbouncer's server connections did not close: $(server_conns true)"
for name in "${bouncers[@]}"; do
    # (Closing a server connection is pgbouncer's, then ours: give it a moment.)
    same() { [ "$(descriptors "$name")" = "$(cat "$work/$name.fds0")" ]; }
    wait_for 30 same || fail "$name holds $(descriptors "$name") descriptors, $(cat "$work/$name.fds0") before any server connection: $(ls -l "/proc/$(bouncer_pid "$name")/fd")"
done
echo "ok: with its server connections closed, each pgbouncer holds the descriptors it held before it had any"

# Nothing else on pgbouncer's stderr; both still run; no backend crashed.
unexpected=$(grep -v 'with_rsocket: RDMA is not possible for server "127.0.0.1"' "$work/bouncer.err" "$work/bouncer_tls.err" || true)
[ -z "$unexpected" ] || fail "pgbouncer's stderr: $unexpected"
for name in "${bouncers[@]}"; do kill -0 "$(bouncer_pid "$name")" 2>/dev/null || fail "$name ended"; done
if grep -E 'terminated by signal|was terminated' "$log"; then fail "a backend crashed"; fi
echo "PASS: pgbouncer"
