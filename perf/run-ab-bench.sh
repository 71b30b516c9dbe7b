#!/usr/bin/env bash
# perf/run-ab-bench.sh BUILD_A BUILD_B
#
# Runs INSIDE the counted Soft-RoCE guest (scripts/bench ab starts it): the
# A/B of a data-path change, both builds' transport_bench in one run,
# A, then B, then A again (A') at each step, on the counted clock, where
# the same code repeats its figures: one-way p50 at 64 B, 4 KiB and 64 KiB,
# bandwidth at 4 KiB, 64 KiB and 1 MiB, 8 request/response pairs of 64 B
# at once, and the CPU per message at each end (the measured phases only).
# Prints one table: B/A per figure beside A'/A, the same code's own
# spread in this run; a B/A inside the A'/A spread (or within 2 %) is no
# change.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -eq 2 ] || { sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0" >&2; exit 2; }
: "${RXE_IP:?run me inside the Soft-RoCE guest}"
readonly A=$1/perf/transport_bench B=$2/perf/transport_bench
readonly PAIRS=8 PAIR_TRIPS=8000 TIMEOUT_S=300 LISTEN_WAIT_S=30
# Under perf/results (the host's, shared with the guest): the raw logs
# outlive the guest, so a figure can be traced to its lines.
mkdir -p "$HERE/results" && OUT=$(mktemp -d "$HERE/results/ab-$(date -u +%Y%m%dT%H%M%SZ)-XXXX") || exit 1
PORT=18600
say() { echo "ab: $*" >&2; }

# serve BIN LOG: a server on the next port, waited for; prints its pid.
serve() {
  PORT=$((PORT + 1))
  timeout "$TIMEOUT_S" "$1" server --addr "$RXE_IP" --port "$PORT" >"$2" 2>&1 &
  local pid=$! deadline=$((SECONDS + LISTEN_WAIT_S))
  until grep -qs '^listening ' "$2"; do
    [ $SECONDS -lt $deadline ] || { say "no server in $2"; kill "$pid"; return 1; }
    sleep 0.1
  done
  SERVER_PID=$pid
}

# As the counted transport run measures: with 2,000 round trips the CPU
# per round trip at 64 B moved by 6-9 % between A and A again (about half
# of ours' waits sleep there), and a 1 s stream's receiver CPU by 12 %.
readonly LAT_BUDGET=(--iters 8000 --seconds 4) BW_BUDGET=(--seconds 2)

one() {  # one BIN NAME MODE SIZE
  local budget=("${BW_BUDGET[@]}")
  [ "$3" = latency ] && budget=("${LAT_BUDGET[@]}")
  serve "$1" "$OUT/$2.server.log" || return 1
  if ! timeout "$TIMEOUT_S" "$1" client --addr "$RXE_IP" --port "$PORT" --mode "$3" --sizes "$4" \
       "${budget[@]}" >"$OUT/$2.client.log" 2>&1; then
    say "$2: the client failed (see $OUT/$2.client.log)"
    kill "$SERVER_PID" 2>/dev/null
  fi
  wait "$SERVER_PID"
}

pairs() {  # pairs BIN NAME
  local i pids=() spids=()
  for ((i = 1; i <= PAIRS; i++)); do
    serve "$1" "$OUT/$2-$i.server.log" || return 1
    spids+=("$SERVER_PID")
    echo "$PORT" >"$OUT/$2-$i.port"
  done
  for ((i = 1; i <= PAIRS; i++)); do
    timeout "$TIMEOUT_S" "$1" client --addr "$RXE_IP" --port "$(cat "$OUT/$2-$i.port")" --mode latency \
      --sizes 64 --iters "$PAIR_TRIPS" --seconds 100 >"$OUT/$2-$i.client.log" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}" "${spids[@]}"
}

for step in lat-64 lat-4096 lat-65536 bw-4096 bw-65536 bw-1048576; do
  mode=latency; [ "${step%%-*}" = bw ] && mode=bandwidth
  for v in A B A2; do
    say "$step $v"
    bin=$A; [ $v = B ] && bin=$B
    one "$bin" "$v-$step" "$mode" "${step#*-}"
  done
done
for v in A B A2; do
  say "pairs $v"
  bin=$A; [ $v = B ] && bin=$B
  pairs "$bin" "$v-pairs"
done
python3 "$HERE/ab_report.py" "$OUT" | tee "$OUT/report.txt"
