#!/usr/bin/env bash
# perf/run-storm-bench.sh BUILD_DIR [OUT_JSON]
#
# Runs INSIDE the Soft-RoCE guest (scripts/bench storm starts it through
# regress/rxe-guest, which exports RXE_IP and sets ulimit -l unlimited).
# Starts PostgreSQL 15 with the built pg_rdma (regress/pg) and, for each
# storm size, opens that many libpq connections at the same instant from
# one process (libclient/tests/rdma/crowd), over RDMA (pgrdma,
# with_rsocket=true, the fallback allowed: a storm is about every session
# connecting) and over TCP (plain libpq) to the same server and address,
# in rounds (TCP, RDMA; RDMA, TCP; ...). Each run holds its sessions open
# a few seconds once the last is made, and at that peak the server's
# backends are read from /proc: their pinned memory (VmPin) and open
# descriptors; the client reports its own. perf/storm_report.py prints the
# table (medians over rounds; RDMA/TCP ratios of the setup latency) and
# writes OUT_JSON (default perf/results/storm-<UTC time>.json). The raw
# output stays in OUT_JSON's name without .json. The last line printed is
# the JSON path.
# Environment: PG_RDMA_STORM_SIZES (default "200 500"),
# PG_RDMA_STORM_ROUNDS (1 to 9, default 3).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
readonly HERE ROOT

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  sed -n '2,21s/^# \{0,1\}//p' "$0" >&2
  exit 2
fi
BUILD=$(cd "$1" && pwd) || exit 2
OUT_JSON=${2:-$HERE/results/storm-$(date -u +%Y%m%dT%H%M%SZ).json}
RAW=${OUT_JSON%.json}
CROWD=$BUILD/libclient/tests/rdma/crowd
PGRDMA=$BUILD/libclient/pgrdma
: "${RXE_IP:?run me inside the Soft-RoCE guest (regress/rxe-guest): RXE_IP is not set}"
readonly BUILD OUT_JSON RAW CROWD PGRDMA

SIZES=${PG_RDMA_STORM_SIZES:-200 500}
ROUNDS=${PG_RDMA_STORM_ROUNDS:-3}
case $ROUNDS in [1-9]) ;; *) echo "PG_RDMA_STORM_ROUNDS: 1 to 9, not '$ROUNDS'" >&2; exit 2 ;; esac
readonly SIZES ROUNDS
readonly HOLD_S=10         # sessions stay open this long at the peak
readonly PEAK_WAIT_S=300   # for a storm to reach its peak line
readonly RUN_TIMEOUT_S=$((PEAK_WAIT_S + HOLD_S + 60))
readonly CONNECTIONS_SPARE=20
PG_CLUSTER_PORT=54510  # regress/pg reads it

say() { echo "bench: $*" >&2; }
RESULTS=$RAW/results.txt  # "key value" lines, read by storm_report.py
record() { echo "$1 $2" >>"$RESULTS"; }

# shellcheck source=regress/pg/cluster.sh
. "$ROOT/regress/pg/cluster.sh"

largest=0
for size in $SIZES; do
  case $size in '' | *[!0-9]*) echo "PG_RDMA_STORM_SIZES: numbers, not '$size'" >&2; exit 2 ;; esac
  [ "$size" -gt "$largest" ] && largest=$size
done

mkdir -p "$RAW" || exit 1
: >"$RESULTS"
pg_cluster_init "$(mktemp -d /tmp/pg_rdma-storm.XXXXXX)" "$BUILD" \
  "max_connections = $((largest + CONNECTIONS_SPARE))" "log_connections = off" "log_disconnections = off" ||
  exit 1
pg_cluster_start || exit 1  # cluster.sh's EXIT trap stops and removes it
pg_cluster_set_password postgres secret || exit 1
pg_cluster_psql -c 'create extension pg_rdma' >/dev/null || exit 1
postmaster=$(head -n 1 "$PG_CLUSTER_DATA/postmaster.pid")
idle_children=$(pgrep -c -P "$postmaster")  # its own processes, no backend

# The postmaster's children at the peak: "pinned_kb descriptors" summed.
# One process each for all of them: a few hundred reads one by one take
# longer than the peak lasts in the emulated guest.
server_peak() {
  local -a pids status fd
  local pid kb fds
  mapfile -t pids < <(pgrep -P "$postmaster")
  for pid in "${pids[@]}"; do
    status+=("/proc/$pid/status")
    fd+=("/proc/$pid/fd")
  done
  [ "${#pids[@]}" -gt 0 ] || { echo "0 0"; return; }
  # cat, not awk on the files: a backend that has gone meanwhile is skipped.
  kb=$(cat "${status[@]}" 2>/dev/null | awk '/^VmPin:/ { s += $2 } END { print s + 0 }')
  fds=$(find "${fd[@]}" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  echo "$kb $fds"
}

# storm SIZE TRANSPORT ROUND: one run; its figures recorded as
# storm.SIZE.TRANSPORT.NAME (one line per round).
storm() {
  local size=$1 transport=$2 round=$3 out peak line waited=0
  out=$RAW/$size-$transport-$round.out
  local -a cmd
  if [ "$transport" = rdma ]; then
    cmd=("$PGRDMA" "$CROWD" "dbname=postgres with_rsocket=true" "$size" "$HOLD_S")
  else
    cmd=("$CROWD" "dbname=postgres" "$size" "$HOLD_S")
  fi
  # shellcheck disable=SC2016  # expanded by the inner shell
  pg_cluster_client timeout "$RUN_TIMEOUT_S" bash -c 'ulimit -l unlimited; exec "$@"' storm "${cmd[@]}" \
    >"$out" 2>"$out.err" &
  local client=$!
  until grep -q '^peak ' "$out" 2>/dev/null; do
    if ! kill -0 "$client" 2>/dev/null || [ "$waited" -ge $((PEAK_WAIT_S * 10)) ]; then break; fi
    sleep 0.1
    waited=$((waited + 1))
  done
  peak=$(server_peak)
  wait "$client"
  local rc=$?
  line=$(grep '^connected=' "$out")
  if [ -z "$line" ]; then
    say "storm of $size over $transport (round $round) printed no result (exit $rc): $(head -3 "$out.err")"
    record "storm.$size.$transport.failed" "$size"
    return
  fi
  local connected rdma failed p50 p99 max client_fds client_kb
  connected=$(sed -n 's/^connected=\([0-9]*\).*/\1/p' "$out")
  rdma=$(sed -n 's/^connected=[0-9]* rdma=\([0-9]*\).*/\1/p' "$out")
  failed=$(sed -n 's/.* failed=\([0-9]*\).*/\1/p' "$out")
  read -r p50 p99 max < <(sed -n 's/^setup_ms p50=\([0-9.]*\) p99=\([0-9.]*\) max=\([0-9.]*\)/\1 \2 \3/p' "$out")
  read -r client_fds client_kb < <(sed -n 's/^peak descriptors=\([-0-9]*\) pinned_kb=\([-0-9]*\)/\1 \2/p' "$out")
  record "storm.$size.$transport.connected" "$connected"
  record "storm.$size.$transport.rdma" "$rdma"
  record "storm.$size.$transport.failed" "$failed"
  record "storm.$size.$transport.p50_ms" "$p50"
  record "storm.$size.$transport.p99_ms" "$p99"
  record "storm.$size.$transport.max_ms" "$max"
  record "storm.$size.$transport.client_descriptors" "$client_fds"
  record "storm.$size.$transport.client_pinned_kb" "$client_kb"
  record "storm.$size.$transport.server_pinned_kb" "${peak% *}"
  record "storm.$size.$transport.server_descriptors" "${peak#* }"
  say "storm of $size over $transport (round $round): $line; $(grep '^setup_ms' "$out");" \
    "server pinned ${peak% *} kB, descriptors ${peak#* }"
  # The next storm starts from a server whose backends have all gone.
  local settle=0
  while [ "$(pgrep -c -P "$postmaster")" -gt "$idle_children" ] && [ "$settle" -lt 300 ]; do
    sleep 0.1
    settle=$((settle + 1))
  done
}

for size in $SIZES; do
  for round in $(seq 1 "$ROUNDS"); do
    if [ $((round % 2)) -eq 1 ]; then order="tcp rdma"; else order="rdma tcp"; fi
    for transport in $order; do storm "$size" "$transport" "$round"; done
  done
done
python3 "$HERE/storm_report.py" "$RESULTS" "$OUT_JSON" "${PG_RDMA_BENCH_HOST_LOAD:-}" || exit 1
echo "$OUT_JSON"
