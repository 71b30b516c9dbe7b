#!/usr/bin/env bash
# A server whose RDMA never answers, through libpq_rdma.so in the Soft-RoCE
# guest: a relay (silent_rdma_relay.py) answers the upgrade request with an
# endpoint whose rdma_cm listener never accepts (silent_listener), as when a
# firewall drops RoCE, and relays everything else to a real PostgreSQL 15.
# The attempt must be bounded and cheap: with_rsocket=true lands on TCP
# within the RDMA setup's bound (the server's advertised budget, or half of
# libpq's connect_timeout), require fails within connect_timeout naming what
# to check, the error text does not grow while waiting, and the client's CPU
# stays far below the time it waited (no busy loop). A server that never
# answers the request at all costs what a silent TCP server costs.
# Usage: silent_peer_test.sh PGRDMA BUILD_DIR SILENT_LISTENER RELAY_PY
set -euo pipefail
pgrdma=$1 build=$2 listener=$3 relay=$4
IP=${RXE_IP:?run in the Soft-RoCE guest}
# shellcheck source=regress/pg/cluster.sh
. "$(dirname "$(readlink -f "$0")")/../../../regress/pg/cluster.sh"
SERVER_PORT=54436 RELAY_PORT=54437 RELAY_BUDGET_PORT=54438 HANG_PORT=54439
SLACK_S=5  # the RDMA libraries' first start in psql (0.5-1 s) and teardown, on an emulated CPU

PG_CLUSTER_PORT=$SERVER_PORT
pg_cluster_init "$(mktemp -d /tmp/pg_rdma-silent.XXXXXX)" "$build" \
    "shared_preload_libraries = ''" "listen_addresses = '$IP'"
pg_cluster_start
pg_cluster_set_password postgres secret
work=$PG_CLUSTER_WORK

fail() { echo "FAIL: $*"; exit 1; }
helpers=()
cleanup_helpers() { for p in "${helpers[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap 'cleanup_helpers; pg_cluster_cleanup' EXIT

"$listener" "$IP" >"$work/listener.port" &
helpers+=($!)
wait_for 30 test -s "$work/listener.port" || fail "silent_listener did not start"
rdma_port=$(head -1 "$work/listener.port")
start_relay() {  # PORT BUDGET_MS [--no-reply]
    python3 "$relay" "$IP" "$1" "$SERVER_PORT" "$rdma_port" "$2" "${@:3}" >"$work/relay.$1" 2>&1 &
    helpers+=($!)
    wait_for 30 grep -q listening "$work/relay.$1" || fail "relay on $1 did not start: $(cat "$work/relay.$1")"
}
start_relay "$RELAY_PORT" 30000            # the server's budget larger than the client's
start_relay "$RELAY_BUDGET_PORT" 2000      # the server's budget smaller
start_relay "$HANG_PORT" 30000 --no-reply  # never answers the request

# attempt NAME PORT CONNINFO: psql through pgrdma, timed; leaves rc, wall
# (s), cpu (s, user + system of everything it ran) and its output in
# $work/NAME.out / .err.
attempt() {
    local name=$1 port=$2 conninfo=$3 t0 t1
    t0=$(date +%s.%N)
    (
        set +e
        PGCONNECT_TIMEOUT= pg_cluster_client env -u PGCONNECT_TIMEOUT "$pgrdma" psql -X -At \
            -d "host=$IP port=$port dbname=postgres $conninfo" -c 'select 42' \
            >"$work/$name.out" 2>"$work/$name.err"
        echo $? >"$work/$name.rc"
        times >"$work/$name.times"  # its second line: the children's user and system time
    )
    t1=$(date +%s.%N)
    rc=$(cat "$work/$name.rc")
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    cpu=$(awk 'NR == 2 { n = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); n += p[1] * 60 + p[2] } printf "%.2f", n }' \
        "$work/$name.times")
    echo "    $name: exit $rc after ${wall} s, client CPU ${cpu} s; stderr: $(tr '\n' ' ' <"$work/$name.err")"
}
within() { awk -v w="$wall" -v b="$1" 'BEGIN { exit !(w < b) }'; }
# No busy loop: past what a plain session costs (base_cpu in base_wall),
# the client slept through its wait. A spinning client burns a CPU second
# per second it waits.
cheap() {
    awk -v c="$cpu" -v w="$wall" -v bc="$base_cpu" -v bw="$base_wall" \
        'BEGIN { extra_w = w - bw; if (extra_w < 0) extra_w = 0; exit !(c - bc < 0.25 * extra_w + 0.5) }'
}
expired_count() { grep -o 'timeout expired' "$work/$1.err" | wc -l; }

# 0. What a session through the relay costs without RDMA: the bounds below
#    are this plus the setup's bound plus slack.
attempt plain "$RELAY_BUDGET_PORT" "with_rsocket=false"
[ "$rc" = 0 ] && [ "$(cat "$work/plain.out")" = 42 ] || fail "a plain session through the relay failed"
base=${wall%.*} base_wall=$wall base_cpu=$cpu
# with_rsocket=true under a connect_timeout gives RDMA half of it and TCP
# the rest, which must hold a plain session through the relay: on the
# emulated CPU, beside another test, one took more than the 3 s that a 6 s
# timeout left (2026-12-01). So the timeout here is twice a plain session
# (rounded up) plus the slack: the TCP half holds both (12 s at least).
true_timeout=$((2 * (base + 1 + SLACK_S)))

# 1. true, no connect_timeout: the server's 2 s budget bounds the setup
#    (the client's own is 10 s).

attempt true_budget "$RELAY_BUDGET_PORT" "with_rsocket=true"
[ "$rc" = 0 ] && [ "$(cat "$work/true_budget.out")" = 42 ] || fail "with_rsocket=true did not land on TCP"
grep -q 'RDMA is not possible' "$work/true_budget.err" || fail "no fallback warning"
grep -q 'UDP port 4791' "$work/true_budget.err" || fail "the warning does not say what to check (UDP port 4791)"
within $((base + 2 + SLACK_S)) ||
    fail "the fallback took ${wall} s, past a plain session's ${base} s + the server's 2 s budget + ${SLACK_S} s"
cheap || fail "the client used ${cpu} s of CPU in ${wall} s (a plain session: ${base_cpu} s in ${base_wall} s): a busy loop"
echo "ok: with_rsocket=true and a silent RDMA peer: on TCP within the server's budget (${wall} s, ${cpu} s CPU)"

# 2. true, connect_timeout: RDMA gets half, the session lands on TCP in time.
attempt true_timeout "$RELAY_PORT" "with_rsocket=true connect_timeout=$true_timeout"
[ "$rc" = 0 ] && [ "$(cat "$work/true_timeout.out")" = 42 ] ||
    fail "with_rsocket=true connect_timeout=$true_timeout did not land on TCP before libpq's timeout"
[ "$(expired_count true_timeout)" = 0 ] || fail "libpq's timeout expired"
within $((base + true_timeout + SLACK_S)) || fail "took ${wall} s"
cheap || fail "the client used ${cpu} s of CPU in ${wall} s (a plain session: ${base_cpu} s in ${base_wall} s): a busy loop"
echo "ok: with_rsocket=true connect_timeout=$true_timeout and a silent RDMA peer: on TCP in ${wall} s (${cpu} s CPU)"

# 3. require, connect_timeout=4: fails within it, saying what to check.
attempt require_timeout "$RELAY_PORT" "with_rsocket=require connect_timeout=4"
[ "$rc" != 0 ] || fail "with_rsocket=require connected without RDMA"
grep -q 'UDP port 4791' "$work/require_timeout.err" || fail "require's error does not say what to check"
[ "$(expired_count require_timeout)" -le 1 ] || fail "the error text grew: $(expired_count require_timeout) x 'timeout expired'"
within $((base + 4 + SLACK_S)) || fail "require took ${wall} s to fail"
cheap || fail "the client used ${cpu} s of CPU in ${wall} s (a plain session: ${base_cpu} s in ${base_wall} s): a busy loop"
echo "ok: with_rsocket=require connect_timeout=4 and a silent RDMA peer: fails in ${wall} s naming UDP port 4791"

# 4. A server that never answers the request (a backend that hangs before
#    replying): true with a connect_timeout gives the reply half of it, then
#    connects afresh without asking (the relay serves such a client);
#    require waits for libpq's own timeout and says what it was waiting for.
attempt hang_true "$HANG_PORT" "with_rsocket=true connect_timeout=$true_timeout"
[ "$rc" = 0 ] && [ "$(cat "$work/hang_true.out")" = 42 ] ||
    fail "with_rsocket=true did not land on TCP when the reply never came"
grep -q 'did not answer the RDMA upgrade request' "$work/hang_true.err" || fail "the warning does not say the reply never came"
[ "$(expired_count hang_true)" = 0 ] || fail "libpq's timeout expired"
within $((base + true_timeout + SLACK_S)) || fail "took ${wall} s"
cheap || fail "the client used ${cpu} s of CPU in ${wall} s (a plain session: ${base_cpu} s in ${base_wall} s): a busy loop"
echo "ok: with_rsocket=true connect_timeout=$true_timeout and a server that never replies: on a fresh TCP connection in ${wall} s"
attempt hang_require "$HANG_PORT" "with_rsocket=require connect_timeout=3"
[ "$rc" != 0 ] || fail "require connected to a server that never answered"
[ "$(expired_count hang_require)" = 1 ] ||
    fail "'timeout expired' $(expired_count hang_require) times, not once: $(cat "$work/hang_require.err")"
grep -q "libpq's connect_timeout ran out while awaiting the reply" "$work/hang_require.err" ||
    fail "require's error does not say what it was waiting for"
within $((base + 3 + SLACK_S)) || fail "took ${wall} s"
cheap || fail "the client used ${cpu} s of CPU in ${wall} s (a plain session: ${base_cpu} s in ${base_wall} s): a busy loop"
echo "ok: with_rsocket=require and a server that never replies: libpq's own timeout, once, with the stage (${wall} s)"
