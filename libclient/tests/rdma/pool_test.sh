#!/usr/bin/env bash
# A connection pool in one process, in the Soft-RoCE guest: THREADS threads,
# each opening, using (queries and a transaction, a pipeline, a large result
# on a non-blocking connection) and closing with_rsocket=require
# connections while the others do the same, for SECONDS, against a real
# PostgreSQL 15 with the built pg_rdma (pool.cpp). Once under
# AddressSanitizer, once under ThreadSanitizer, each with the whole client
# library built under it: no report, no failed connection, every one over
# RDMA, and afterwards no descriptor left open and no byte left pinned
# (pool.cpp also shows that both figures rose while sessions were open).
# Usage: pool_test.sh POOL_ASAN LIBPQ_RDMA_ASAN LIBASAN POOL_TSAN LIBPQ_RDMA_TSAN LIBTSAN BUILD_DIR
set -euo pipefail
pool_asan=$1 so_asan=$2 libasan=$3 pool_tsan=$4 so_tsan=$5 libtsan=$6 build=$7
IP=${RXE_IP:?run in the Soft-RoCE guest}
# shellcheck source=regress/pg/cluster.sh
. "$(dirname "$(readlink -f "$0")")/../../../regress/pg/cluster.sh"
readonly THREADS=32 SECONDS_EACH=45
# A sanitizer's report ends the program with this status, so that it cannot
# pass for the program's own failure or success.
readonly SANITIZER_EXIT=86

PG_CLUSTER_PORT=54485
# Room for every thread's session and the test's own, plus the ones still
# ending when the next starts.
pg_cluster_init "$(mktemp -d /tmp/pg_rdma-pool.XXXXXX)" "$build" "max_connections = $((THREADS * 2 + 10))"
pg_cluster_start
pg_cluster_set_password postgres secret
pg_cluster_psql -c 'create extension pg_rdma' >/dev/null
log=$(pg_cluster_log)
fail() { echo "FAIL: $*"; echo "--- server log (tail):"; tail -20 "$log"; exit 1; }
for f in "$libasan" "$libtsan"; do [ -f "$f" ] || fail "no sanitizer runtime at $f"; done

# run SANITIZER PROGRAM PRELOAD OPTIONS_VAR=OPTIONS
run() {
    local name=$1 prog=$2 preload=$3 options=$4 rc=0 out
    out=$(ulimit -l unlimited && pg_cluster_client env LD_PRELOAD="$preload" "$options" \
        timeout $((SECONDS_EACH + 240)) "$prog" "dbname=postgres with_rsocket=require" "$THREADS" "$SECONDS_EACH" 2>&1) ||
        rc=$?
    [ "$rc" != "$SANITIZER_EXIT" ] || fail "$name reported: $out"
    ! grep -q 'Sanitizer' <<<"$out" || fail "$name reported: $out"
    [ "$rc" = 0 ] || fail "the pool under $name: exit $rc: $out"
    local connections rdma
    read -r connections rdma <<<"$(sed -n 's/^connections=\([0-9]*\) rdma=\([0-9]*\) failed=0$/\1 \2/p' <<<"$out")"
    [ -n "$connections" ] || fail "the pool under $name: $out"
    # Each thread must have opened, closed and opened again, at least.
    [ "$connections" -ge $((THREADS * 2)) ] || fail "the pool under $name made only $connections connections: $out"
    [ "$rdma" = "$connections" ] || fail "the pool under $name: $rdma of $connections on RDMA: $out"
    echo "ok: $THREADS threads for ${SECONDS_EACH}s under $name: $connections connections, all over RDMA;" \
        "$(grep '^descriptors' <<<"$out"); $(grep '^pinned_kb' <<<"$out"); $(grep '^peak' <<<"$out") (${SECONDS}s)"
}

# ASan: also what is never freed (LeakSanitizer), at exit.
run AddressSanitizer "$pool_asan" "$libasan $so_asan" \
    ASAN_OPTIONS=detect_leaks=1:exitcode=$SANITIZER_EXIT:abort_on_error=0
run ThreadSanitizer "$pool_tsan" "$libtsan $so_tsan" \
    TSAN_OPTIONS=exitcode=$SANITIZER_EXIT:halt_on_error=0:report_signal_unsafe=1

if grep -E 'terminated by signal|was terminated' "$log"; then fail "a backend crashed"; fi
echo "PASS: thread pool"
