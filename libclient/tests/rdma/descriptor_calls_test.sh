#!/usr/bin/env bash
# What a program may do to the number of a session on RDMA behind libpq's
# back (descriptor_calls.cpp says each case), in the Soft-RoCE guest against
# a real PostgreSQL with the built pg_rdma. Each case runs on a session the
# server says is on RDMA, and the server must have seen no crash.
# The cases that close a session under a call still inside it run again
# with the library built under AddressSanitizer: a use after free fails.
# Usage: descriptor_calls_test.sh LIBPQ_RDMA_SO DESCRIPTOR_CALLS BUILD_DIR LIBPQ_RDMA_ASAN_SO LIBASAN
set -euo pipefail
so=$1 prog=$2 build=$3 so_asan=$4 libasan=$5
IP=${RXE_IP:?run in the Soft-RoCE guest}
# shellcheck source=regress/pg/cluster.sh
. "$(dirname "$(readlink -f "$0")")/../../../regress/pg/cluster.sh"

PG_CLUSTER_PORT=54435
pg_cluster_init "$(mktemp -d /tmp/pg_rdma-descriptors.XXXXXX)" "$build" "log_connections = on"
pg_cluster_start
pg_cluster_set_password postgres secret
log=$(pg_cluster_log)
cp "$PG_CLUSTER_WORK/pgpass" /tmp/pg_rdma-descriptors.pgpass && chmod 600 /tmp/pg_rdma-descriptors.pgpass
export PGPASSFILE=/tmp/pg_rdma-descriptors.pgpass
fail() { echo "FAIL: $*"; echo "--- server log:"; tail -20 "$log"; exit 1; }
upgraded() { grep -c 'pg_rdma: connection upgraded' "$log" || true; }
rdma="host=$IP port=$PG_CLUSTER_PORT user=postgres dbname=postgres with_rsocket=require"

# (The symbols read whole first: grep -q would stop reading early, and
# pipefail would call readelf's SIGPIPE a failure.)
symbols=$(readelf -s --wide "$prog")
for chk in __poll_chk __read_chk; do
    grep -q "$chk" <<<"$symbols" || fail "descriptor_calls is not fortified (no $chk)"
done
# run_case PRELOAD MODE [ENV...]
run_case() {
    local n rc=0 out preload=$1 mode=$2
    shift 2
    n=$(upgraded)
    out=$(env LD_PRELOAD="$preload" ASAN_OPTIONS=detect_leaks=0:exitcode=86 "$@" timeout 120 "$prog" "$mode" "$rdma" 2>&1) || rc=$?
    [ "$rc" = 0 ] || fail "$mode under $(basename "${preload##* }") (exit $rc): $out"
    [ "$(upgraded)" = $((n + 1)) ] || fail "$mode: the session was not on RDMA"
    echo "$out"
}
for mode in dup msg fortified replaced close_range closefrom fclose syscall_close signal_close thread_close vfork fionread; do
    run_case "$so" "$mode"
done
[ -f "$libasan" ] || fail "no AddressSanitizer runtime at $libasan"
for mode in signal_close thread_close dup; do
    run_case "$libasan $so_asan" "$mode" DESCRIPTOR_CALLS_QUICK_EXIT=1
done
echo "ok: closing under a call, and closing a copy, under AddressSanitizer: no use after free"
! grep -q 'terminated by signal\|server process .* was terminated' "$log" || fail "a backend crashed"
echo "ok: every case on a session over RDMA; no backend crashed"
