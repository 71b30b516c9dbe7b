#!/usr/bin/env bash
# Drivers that speak the protocol themselves, or reach libpq around
# libpq_rdma.so's wrappers, under pgrdma in the Soft-RoCE guest, each from
# its packages: asyncpg (asyncio, epoll) and psycopg 3 in its pure-Python
# mode (libpq through ctypes) from Debian, pgJDBC (Debian's jar on the JVM)
# and node-postgres (npm's pg, on Node's libuv), against a real PostgreSQL
# 15 with the built pg_rdma. Their connections are upgraded at their first
# write (libclient/preload/first_write.hpp), as the servers file or
# WITH_RSOCKET says. Each driver's session (drivers/) runs a transaction, a
# large result, COPY both ways, a pipelined or concurrent batch and a
# cancel, with and without TLS; which transport it used is what the
# server's pg_stat_rdma says. Then the fallbacks: a server address without
# an RDMA device, a server without pg_rdma, require where RDMA is
# impossible, and a rule saying false.
# Usage: drivers_test.sh PGRDMA BUILD_DIR JDBC_CLASS_DIR JDBC_JAR FIRST_WRITE_PROBE
set -euo pipefail
pgrdma=$1 build=$2 jdbc_classes=$3 jdbc_jar=$4 probe=$5
IP=${RXE_IP:?run in the Soft-RoCE guest}
here=$(dirname "$(readlink -f "$0")")
# shellcheck source=regress/pg/cluster.sh
. "$here/../../../regress/pg/cluster.sh"
# shellcheck source=regress/pg/client_checks.sh
. "$here/../../../regress/pg/client_checks.sh"
python=/usr/bin/python3  # Debian's, where python3-asyncpg and python3-psycopg are
node_modules=$build/node_drivers/node_modules
missing() { echo "FAIL: $* (scripts/test installs every driver: scripts/lib/deps.sh, scripts/lib/drivers.sh)"; exit 1; }
for module in asyncpg psycopg; do
    "$python" -c "import $module" 2>/dev/null || missing "Debian's python3-$module is not installed"
done
[ -f "$jdbc_classes/JdbcSession.class" ] && [ -f "$jdbc_jar" ] || missing "pgJDBC's session was not built (javac, $jdbc_jar)"
command -v java >/dev/null || missing "no java"
command -v node >/dev/null || missing "no node"
[ -d "$node_modules/pg" ] && [ -d "$node_modules/pg-copy-streams" ] || missing "no npm pg in $node_modules"

# A server without pg_rdma, on the rxe address.
PG_CLUSTER_PORT=54461
pg_cluster_init "$(mktemp -d /tmp/pg_rdma-drivers-plain.XXXXXX)" "$build" \
    "shared_preload_libraries = ''" "listen_addresses = '$IP'"
pg_cluster_start
pg_cluster_set_password postgres secret
# The pg_rdma server: RDMA on the rxe address, TCP only on 127.0.0.1 (no
# device there), with TLS.
PG_CLUSTER_PORT=54462
pg_cluster_up_for_clients drivers "$build" "log_connections = on"
log=$(pg_cluster_log)
work=$PG_CLUSTER_WORK

fail() { echo "FAIL: $*"; echo "--- server log:"; tail -30 "$log"; exit 1; }
servers=$work/servers.conf
# The large result's rows: 20000 (20 MB) for each driver's first session
# over RDMA; the other sessions check the same steps with fewer.
rows=20000
# run DRIVER HOST PORT SSL [ENV...]: the driver's session under pgrdma,
# stdout to $work/out, stderr to $work/err; its exit status.
run() {
    local driver=$1 host=$2 port=$3 ssl=$4 program stop=(timeout 180)
    shift 4
    case $driver in
        asyncpg | psycopg) program=("$python" "$here/drivers/${driver}_session.py") ;;
        # -Xint: the guest's CPUs are emulated (QEMU TCG), which at times
        # runs the JVM's JIT-compiled code wrongly: with only an empty
        # library preloaded, a JVM died in c1-compiled code in 1 run of 6
        # there (never in 20 runs on the host, with libpq_rdma.so). A JVM
        # that dies writes its report where the failure shows it.
        # A JVM that hangs gets SIGQUIT first: its threads' stacks go to
        # stdout, which the failure shows (exit 137 after the KILL).
        jdbc)
            program=(java -Xint -XX:ErrorFile="$work/hs_err_%p.log" -cp "$jdbc_jar:$jdbc_classes" JdbcSession)
            stop=(timeout -s QUIT -k 15 180)
            ;;
        node) program=(node --no-deprecation "$here/drivers/node_session.js") ;;
    esac
    env -u WITH_RSOCKET PGRDMA_SERVERS_FILE="$servers" DRIVER_ROWS="$rows" NODE_PATH="$node_modules" "$@" \
        "${stop[@]}" "$pgrdma" "${program[@]}" "$host" "$port" secret "$ssl" >"$work/out" 2>"$work/err"
}
expect() {  # expect DRIVER HOST PORT SSL TRANSPORT [ENV...]
    local driver=$1 host=$2 port=$3 ssl=$4 transport=$5
    shift 5
    run "$driver" "$host" "$port" "$ssl" "$@" ||
        fail "$driver to $host:$port ssl=$ssl ${*}: exit $?: $(cat "$work/err" "$work/out"; cat "$work"/hs_err_*.log 2>/dev/null | head -60)"
    grep -qx "$driver transport=$transport ssl=$ssl" "$work/out" ||
        fail "$driver to $host:$port ssl=$ssl ${*}: expected transport=$transport, got: $(cat "$work/out")"
}
drivers="asyncpg psycopg jdbc node"

# 1. Over RDMA: by the sample servers file as it is (conf/servers.conf:
# true for the guest's network) without TLS, then by a require rule with
# TLS; by WITH_RSOCKET.
sample=$here/../../../conf/servers.conf
case $IP in 10.99.0.*) ;; *) fail "conf/servers.conf names 10.99.0.0/24; the guest's address is $IP" ;; esac
for driver in $drivers; do
    cp "$sample" "$servers"
    rows=20000
    # The JVM runs interpreted here (below): a quarter of the rows, 5 MB.
    [ "$driver" != jdbc ] || rows=5000
    expect "$driver" "$IP" 54462 off rdma
    [ ! -s "$work/err" ] || fail "$driver over RDMA said on stderr: $(cat "$work/err")"
    printf '# the pg_rdma server\n%s %s require\n' "$IP" 54462 >"$servers"
    rows=1000
    expect "$driver" "$IP" 54462 on rdma
    echo "ok: $driver over RDMA (the sample servers file; a require rule, with TLS) (${SECONDS}s)"
done
: >"$servers"
expect node "$IP" 54462 off rdma WITH_RSOCKET=require
echo "ok: node over RDMA (WITH_RSOCKET=require)"

# An event loop that registered its socket with epoll before connect()
# (Netty's, Asio's): the registration follows the number onto RDMA.
printf '%s 54462 require\n' "$IP" >"$servers"
before=$(grep -c 'pg_rdma: connection upgraded' "$log" || true)
env -u WITH_RSOCKET PGRDMA_SERVERS_FILE="$servers" timeout 60 "$pgrdma" "$probe" server "$IP" 54462 \
    >"$work/out" 2>"$work/err" || fail "epoll before connect: $(cat "$work/out" "$work/err")"
grep -qx 'reply R' "$work/out" || fail "epoll before connect: $(cat "$work/out" "$work/err")"
[ "$(grep -c 'pg_rdma: connection upgraded' "$log")" = $((before + 1)) ] || fail "epoll before connect: not upgraded"
echo "ok: an epoll registration made before connect() follows the session onto RDMA"

# 2. A rule saying false wins over WITH_RSOCKET: plain TCP, nothing said.
printf '%s/32 * true\n%s 54462 false\n' "$IP" "$IP" >"$servers"
expect asyncpg "$IP" 54462 off tcp WITH_RSOCKET=require
[ ! -s "$work/err" ] || fail "a false rule still said: $(cat "$work/err")"
echo "ok: a rule saying false keeps a driver on TCP"

# 3. true where the server's backend has no device: TCP on the same
# connection, one warning.
printf '127.0.0.1 * true\n' >"$servers"
for driver in $drivers; do
    expect "$driver" 127.0.0.1 54462 off tcp
    grep -q 'WARNING:  with_rsocket: RDMA is not possible for server "127.0.0.1", port 54462: .*; continuing over TCP' \
        "$work/err" || fail "$driver's fallback said: $(cat "$work/err")"
    echo "ok: $driver falls back to TCP where the server has no device (${SECONDS}s)"
done

# 4. true to a server without pg_rdma: a fresh TCP connection, one warning.
printf '%s 54461 true\n' "$IP" >"$servers"
for driver in asyncpg node; do
    expect "$driver" "$IP" 54461 off none
    grep -q "WARNING:  with_rsocket: RDMA is not possible for server \"$IP\", port 54461: .*; continuing over TCP" \
        "$work/err" || fail "$driver's fallback said: $(cat "$work/err")"
    echo "ok: $driver reaches a server without pg_rdma over a fresh TCP connection"
done

# 5. require where RDMA is impossible: the connection fails, and says why.
printf '127.0.0.1 * require\n' >"$servers"
for driver in $drivers; do
    rc=0
    run "$driver" 127.0.0.1 54462 off || rc=$?
    [ "$rc" != 0 ] || fail "$driver with require and no device succeeded: $(cat "$work/out")"
    # The driver's own error, not a crash (>= 128) or the timeout (124).
    [ "$rc" -lt 124 ] || fail "$driver with require: exit $rc: $(cat "$work/err" "$work/out")"
    grep -qi 'refused' "$work/err" "$work/out" || fail "$driver with require did not report a refused connection: $(cat "$work/err")"
    grep -q 'with_rsocket=require: RDMA is not possible for server "127.0.0.1", port 54462: ' "$work/err" ||
        fail "$driver's require failure said: $(cat "$work/err")"
    echo "ok: $driver with require fails where RDMA is impossible (${SECONDS}s)"
done

# The server is whole: no backend crashed.
if grep -E 'terminated by signal|was terminated' "$log"; then fail "a backend crashed"; fi
echo "PASS: drivers"
