#!/usr/bin/env bash
# perf/run-proxy-bench.sh BUILD_DIR [OUT_JSON]
#
# Runs INSIDE the Soft-RoCE guest (scripts/bench proxy starts it through
# regress/rxe-guest, which exports RXE_IP and sets ulimit -l unlimited).
# What `pgrdma proxy` costs: PostgreSQL 15 with the built pg_rdma, and the
# same tiny query (SELECT 1) run by pgbench over four paths to the same
# server and address, in rounds (the order turns each round):
#   tcp         plain libpq over TCP
#   rdma        libpq under pgrdma, with_rsocket=require (a direct session)
#   proxy_unix  plain libpq to the proxy's Unix socket, the proxy on RDMA
#   proxy_tcp   plain libpq to the proxy's loopback port, the proxy on RDMA
# For each: one client's round-trip latency (p50, p99, mean, from pgbench's
# per-transaction log) and 8 clients' transactions per second; for the
# proxy paths also the proxy's CPU time per transaction. perf/proxy_report.py
# prints medians over the rounds with the ratios a reader needs (proxy
# against the direct RDMA session, and against TCP) and writes OUT_JSON
# (default perf/results/proxy-<UTC time>.json); raw output stays in
# OUT_JSON's name without .json. The last line printed is the JSON path.
# With PG_RDMA_PROXY_BENCH_ON_HOST=1 it runs on the host instead, where
# there is no RDMA device: the server on 127.0.0.1, the paths tcp,
# proxy_unix and proxy_tcp, the proxy carrying over TCP (WITH_RSOCKET=false).
# The difference from tcp is then the local hop's own cost on a real CPU,
# which the emulated guest inflates many times (every system call and
# thread wakeup is emulated there).
# Environment: PG_RDMA_BENCH_HOST_LOAD (set by scripts/bench),
# PG_RDMA_PROXY_BENCH_SECONDS (per pgbench run, default 5),
# PG_RDMA_PROXY_BENCH_ROUNDS (1 to 9, default 3).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
readonly HERE ROOT

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  sed -n '2,28s/^# \{0,1\}//p' "$0" >&2
  exit 2
fi
BUILD=$(cd "$1" && pwd) || exit 2
OUT_JSON=${2:-$HERE/results/proxy-$(date -u +%Y%m%dT%H%M%SZ).json}
RAW=${OUT_JSON%.json}
PGRDMA=$BUILD/libclient/pgrdma
if [ -n "${PG_RDMA_PROXY_BENCH_ON_HOST:-}" ]; then
  WHERE=host SERVER_IP=127.0.0.1 PATHS="tcp proxy_unix proxy_tcp" PROXY_POLICY=false
else
  : "${RXE_IP:?run me inside the Soft-RoCE guest (regress/rxe-guest): RXE_IP is not set}"
  WHERE=guest SERVER_IP=$RXE_IP PATHS="tcp rdma proxy_unix proxy_tcp" PROXY_POLICY=require
fi
readonly BUILD OUT_JSON RAW PGRDMA WHERE SERVER_IP PATHS PROXY_POLICY

SECONDS_PER_RUN=${PG_RDMA_PROXY_BENCH_SECONDS:-5}
ROUNDS=${PG_RDMA_PROXY_BENCH_ROUNDS:-3}
case $ROUNDS in [1-9]) ;; *) echo "PG_RDMA_PROXY_BENCH_ROUNDS: 1 to 9, not '$ROUNDS'" >&2; exit 2 ;; esac
case $SECONDS_PER_RUN in '' | *[!0-9]* | 0) echo "PG_RDMA_PROXY_BENCH_SECONDS: a number of seconds, not '$SECONDS_PER_RUN'" >&2; exit 2 ;; esac
readonly SECONDS_PER_RUN ROUNDS
readonly MANY_CLIENTS=8 THREADS=2  # the guest has 2 vCPUs
readonly PROXY_PORT=6510
readonly RUN_TIMEOUT_S=$((SECONDS_PER_RUN + 120))
PG_CLUSTER_PORT=54520  # regress/pg reads it

say() { echo "bench: $*" >&2; }
RESULTS=$RAW/results.txt  # "key value" lines, read by proxy_report.py
record() { echo "$1 $2" >>"$RESULTS"; }

# shellcheck source=regress/pg/cluster.sh
. "$ROOT/regress/pg/cluster.sh"

mkdir -p "$RAW" || exit 1
: >"$RESULTS"
record where "$WHERE"
pg_cluster_init "$(mktemp -d /tmp/pg_rdma-proxybench.XXXXXX)" "$BUILD" \
  "log_connections = off" "log_disconnections = off" || exit 1
pg_cluster_start || exit 1  # cluster.sh's EXIT trap stops and removes it
pg_cluster_set_password postgres secret || exit 1
pg_cluster_psql -c 'create extension pg_rdma' >/dev/null || exit 1
export PGPASSWORD=secret PGUSER=postgres PGDATABASE=postgres PGSSLMODE=disable
echo 'select 1;' >"$RAW/select1.sql"

# (In the cluster's own directory: in the guest, a Unix socket cannot live
# on the host's share.)
sockets=$PG_CLUSTER_WORK/proxy
mkdir -p "$sockets" || exit 1
WITH_RSOCKET=$PROXY_POLICY "$PGRDMA" proxy --listen "$sockets" --listen "127.0.0.1:$PROXY_PORT" \
  "$SERVER_IP:$PG_CLUSTER_PORT" 2>"$RAW/proxy.err" &
PROXY_PID=$!
trap 'kill "$PROXY_PID" 2>/dev/null; pg_cluster_cleanup' EXIT
wait_for 60 grep -q '^pgrdma proxy: listening' "$RAW/proxy.err" || { say "the proxy did not start: $(cat "$RAW/proxy.err")"; exit 1; }

# The proxy's CPU time so far, in clock ticks (utime + stime).
proxy_ticks() { awk '{ print $14 + $15 }' "/proc/$PROXY_PID/stat"; }

# pgbench_on PATH ARG...: pgbench over PATH, its output on stdout.
pgbench_on() {
  local path=$1
  shift
  local -a cmd=(timeout "$RUN_TIMEOUT_S" "$PG_CLUSTER_BIN/pgbench" -n -f "$RAW/select1.sql" -T "$SECONDS_PER_RUN" "$@")
  case $path in
    tcp) "${cmd[@]}" -h "$SERVER_IP" -p "$PG_CLUSTER_PORT" ;;
    rdma) "$PGRDMA" "${cmd[@]}" "host=$SERVER_IP port=$PG_CLUSTER_PORT dbname=postgres with_rsocket=require" ;;
    proxy_unix) "${cmd[@]}" -h "$sockets" -p "$PG_CLUSTER_PORT" ;;
    proxy_tcp) "${cmd[@]}" -h 127.0.0.1 -p "$PROXY_PORT" ;;
  esac
}

# measure PATH ROUND: one client's latencies, then MANY_CLIENTS' rate.
measure() {
  local path=$1 round=$2 dir out ticks0 ticks1 tx hz
  dir=$RAW/$path-$round
  mkdir -p "$dir"
  # One client, every transaction's latency logged (pgbench -l, in the
  # current directory: field 3 is the latency in microseconds).
  out=$( (cd "$dir" && pgbench_on "$path" -c 1 -l 2>&1)) || { say "$path round $round, 1 client: $out"; return; }
  read -r p50 p99 mean n < <(cat "$dir"/pgbench_log.* | awk '{ print $3 }' | sort -n |
    awk '{ v[NR] = $1; s += $1 }
      END { if (NR) { i = int(NR * 0.99 + 0.5); if (i < 1) i = 1; printf "%s %s %.1f %d\n", v[int((NR + 1) / 2)], v[i], s / NR, NR } }')
  rm -f "$dir"/pgbench_log.*
  record "proxy.$path.p50_us" "$p50"
  record "proxy.$path.p99_us" "$p99"
  record "proxy.$path.mean_us" "$mean"
  # MANY_CLIENTS at once; the proxy's CPU across the run.
  ticks0=$(proxy_ticks)
  out=$(pgbench_on "$path" -c "$MANY_CLIENTS" -j "$THREADS" 2>&1) || { say "$path round $round, $MANY_CLIENTS clients: $out"; return; }
  ticks1=$(proxy_ticks)
  tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
  local tps
  tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out")
  record "proxy.$path.tps_$MANY_CLIENTS" "$tps"
  if [ "${path#proxy_}" != "$path" ] && [ "${tx:-0}" -gt 0 ]; then
    hz=$(getconf CLK_TCK)
    record "proxy.$path.proxy_cpu_us_per_tx" "$(awk -v t=$((ticks1 - ticks0)) -v hz="$hz" -v n="$tx" 'BEGIN { printf "%.1f", t * 1e6 / hz / n }')"
  fi
  say "$path round $round: 1 client p50 ${p50} us p99 ${p99} us ($n transactions); $MANY_CLIENTS clients $tps tps"
}

read -ra path_list <<<"$PATHS"
for round in $(seq 1 "$ROUNDS"); do
  # Each round starts the list at another path, so that no path is always first.
  for i in "${!path_list[@]}"; do
    measure "${path_list[$(((i + round - 1) % ${#path_list[@]}))]}" "$round"
  done
done
# In the guest every proxied session was on RDMA (require): the proxy said
# nothing else.
if grep -v '^pgrdma proxy: listening' "$RAW/proxy.err" >/dev/null; then
  say "the proxy reported: $(grep -v '^pgrdma proxy: listening' "$RAW/proxy.err" | head -5)"
fi
python3 "$HERE/proxy_report.py" "$RESULTS" "$OUT_JSON" "${PG_RDMA_BENCH_HOST_LOAD:-}" || exit 1
# A path with no figure is a run that did not measure what it reports.
missing=''
for path in "${path_list[@]}"; do
  grep -q "^proxy\.$path\.p50_us [0-9]" "$RESULTS" && grep -q "^proxy\.$path\.tps_$MANY_CLIENTS [0-9]" "$RESULTS" ||
    missing+=" $path"
done
[ -z "$missing" ] || { say "no figures for:$missing (see the lines above)"; exit 1; }
echo "$OUT_JSON"
