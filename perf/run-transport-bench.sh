#!/usr/bin/env bash
# perf/run-transport-bench.sh BUILD_DIR [OUT_JSON]
#
# Runs INSIDE the Soft-RoCE guest (scripts/bench starts it through
# regress/rxe-guest, which exports RXE_DEV and RXE_IP and sets ulimit -l
# unlimited), or on a host with an RDMA NIC whose servers run on a second
# host (scripts/bench transport --peer; PG_RDMA_BENCH_PEER, below).
# Measures, one at a time and each bounded by a timeout:
#   ours     BUILD_DIR/perf/transport_bench over the pg_rdma transport
#            (waiting in poll(), and again busy-polling: "spin")
#   tcp      the same binary and code over TCP to the same address (--tcp)
#   perftest ib_write_lat / ib_write_bw on RXE_DEV (the raw verbs ceiling),
#            and ib_send_lat / ib_send_bw, busy-polling and sleeping on
#            completion events (-e): raw verbs with ours' mechanism, a
#            receive completion per message
#   rstream  librdmacm's rsocket benchmark
#   rsocket  rsocket again, through transport_bench's own loop (--rsocket),
#            so that its p50, average and bandwidth are measured as ours
#            are: waiting in its rpoll(), and busy-polling as rstream does
#   pairs    8 request/response pairs at once, 64 B: ours, tcp and
#            ib_send_lat -e (raw verbs sleeping on completion events), for
#            what a device's wakeups cost when processes share the CPUs
#   vcopy    ours again from 4 KiB up with glibc's memcpy kept off
#            `rep movsb`, which the TCG guest emulates several times slower
#            than vector moves (BUILD_DIR/perf/copy_speed measures both;
#            env.txt records glibc's threshold for it), and once more
#            busy-polling too ("spin+vcopy"): ours with both of the guest's
#            costs that a real host does not have taken out in the same run,
#            by setting two of ours' own policies the other way (a
#            diagnostic, not a mode ours ships)
# and the CPU time each process used; then perf/report.py prints the table
# and writes OUT_JSON (default perf/results/transport-<UTC time>.json) and a
# PNG chart of the ratios beside it. Raw tool output stays in OUT_JSON's
# name without .json. A measurement that fails is reported as missing and the
# run goes on. The last line printed is the JSON path.
# Counted (PG_RDMA_BENCH_COUNTED=1, scripts/bench transport --counted: a
# guest whose clock counts instructions, one vCPU): only what sleeps is
# measured (ours, TCP, rsocket through the same loop, ib_send_lat -e,
# ib_write_bw, ib_send_bw -e, the pairs): on one CPU a busy-polling process
# holds it until the scheduler's tick, so a spinning tool measures the
# tick. One round (the next would repeat it), perf/counted_report.py.
# Environment: PG_RDMA_BENCH_ROUNDS (default 3, counted 1; report.py shows each tool's
# best round and judges each target on the median of the rounds' own
# ratios, undecided where they disagree; another round starts only if it
# should end within RUN_BUDGET_S),
# PG_RDMA_BENCH_HOST_LOAD (set by scripts/bench).
# Two hosts: PG_RDMA_BENCH_PEER (ssh destination of the host the servers
# run on, by perf/peer-server.sh at this script's path there, with
# BUILD_DIR at the same path), PG_RDMA_BENCH_PEER_ADDR (its address on the
# RDMA network: servers listen and clients connect there),
# PG_RDMA_BENCH_PEER_DEVICE (its RDMA device; RXE_DEV's name if unset),
# RXE_DEV (this host's device).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0" >&2
  exit 2
fi
BUILD=$(cd "$1" && pwd) || exit 2
OUT_JSON=${2:-$HERE/results/transport-$(date -u +%Y%m%dT%H%M%SZ).json}
RAW=${OUT_JSON%.json}
BENCH=$BUILD/perf/transport_bench
COPY_SPEED=$BUILD/perf/copy_speed
# Two hosts (scripts/bench transport --peer): the servers run on the peer,
# over ssh, from the same paths; the clients here. SERVER_IP is where every
# client connects and every server listens.
# shellcheck source=perf/peer.sh
. "$HERE/peer.sh"
peer_setup
COUNTED=${PG_RDMA_BENCH_COUNTED:-0}
DEFAULT_ROUNDS=3
[ "$COUNTED" = 1 ] && DEFAULT_ROUNDS=1
ROUNDS=${PG_RDMA_BENCH_ROUNDS:-$DEFAULT_ROUNDS}
readonly BUILD OUT_JSON RAW BENCH COPY_SPEED ROUNDS COUNTED

# --- what is measured (sizes in bytes; report.py knows the same lists) -------
readonly LAT_SIZES="64 1024 4096 16384 65536"
readonly PERFTEST_FLOOR_SIZE=2   # ib_write_lat's customary minimum
readonly BW_SIZES="4096 65536 1048576"
# glibc's memcpy takes `rep movsb` above a threshold that depends on the
# CPU: 8 KiB on this guest's (AVX2 without FSRM), 2,112 B where the CPU
# has FSRM (QEMU 8 gives it to -cpu max). From 4 KiB up the vcopy runs
# cover both; env.txt says which applied.
readonly VCOPY_MIN_SIZE=4096
# Raising glibc's threshold for `rep movsb` above any copy the transport
# makes keeps memcpy on vector moves.
readonly VCOPY_ENV=GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold=1073741824

# --- budgets: three rounds stay within about 8-12 minutes on TCG --------------
OURS_LAT_SECONDS=1        # per size, after warm-up
OURS_LAT_MAX_ITERS=2000   # round trips per size, at most
# Counted, four times the round trips: at 64 B and 1 KiB about half of
# ours' waits sleep (its spin on one vCPU), and with 2,000 the CPU per
# round trip moved by 2.4 % between runs of the same code.
if [ "$COUNTED" = 1 ]; then OURS_LAT_SECONDS=4 OURS_LAT_MAX_ITERS=8000; fi
readonly OURS_LAT_SECONDS OURS_LAT_MAX_ITERS
readonly OURS_BW_SECONDS=2         # per size, after warm-up
# ib_write_bw runs a fixed number of messages (-n): its -D mode leaves out a
# 2 s margin at each end and measured nothing at 1 MiB in a 3 s run.
readonly IB_BW_BYTES=$((64 << 20))       # per size (~2 s at TCG's ~38 MiB/s)
readonly RSTREAM_BW_BYTES=$((16 << 20))  # per direction, per size
# Another round starts only if the run should still end within this, judged
# by its slowest round so far with ROUND_MARGIN_PERCENT to spare: a quiet
# host runs a round in ~3.5 minutes, a slow one in 5-6, and a single round
# decides no target (each is judged on the median of the rounds' own
# ratios); a host slower than about 11 minutes a round still makes one.
# The memcpy speeds count in it; the boot and the report do not. Well
# below scripts/bench's 2700 s guest limit, so that a last round slower
# than planned still ends with a report.
readonly RUN_BUDGET_S=1500
readonly ROUND_MARGIN_PERCENT=25
readonly PAIR_TIMEOUT_S=120        # any one server or client process
# for a server to start listening; on a peer its word comes over ssh, and
# a slow peer (two TCG guests on a busy host) took longer
LISTEN_WAIT_S=30
[ -n "$PEER" ] && LISTEN_WAIT_S=90
readonly LISTEN_WAIT_S

# Fixed ports, one per tool (servers run one at a time).
readonly PERFTEST_PORT=18515 RSTREAM_PORT=7471
# transport_bench's runs (ours, tcp, rsocket) each take the next of these
# ports, so that none depends on how soon the kernel lets a port go after
# the run before: it releases a closed rdma_cm id's port later, from a
# work queue, and a guest with one vCPU (counted mode) started the next
# server before that ("Address already in use").
readonly BENCH_PORTS_FROM=18600 BENCH_PORTS=100
BENCH_RUNS=0

# Pairs at once: as many clients as pgbench's 8, each with its server, on
# the guest's CPUs. Each pair's port is its tool's base + its number.
readonly PAIRS=8
readonly PAIRS_SIZE=64
# per pair: ~4-8 s for all 8 on TCG, long against their setup. Counted,
# four times that: the pairs' setups (~50 counted ms each, one at a time
# on the one vCPU) then weigh a few per cent of the run, not a fifth, and
# the figure repeats.
PAIRS_ROUND_TRIPS=2000
[ "$COUNTED" = 1 ] && PAIRS_ROUND_TRIPS=8000
readonly PAIRS_ROUND_TRIPS
readonly PAIRS_OURS_PORT=18700 PAIRS_TCP_PORT=18720 PAIRS_PERFTEST_PORT=18740

FAILED=()
OUT=''  # directory of the current round's logs

say() { echo "bench: $*" >&2; }

# Round trips for perftest and rstream latency runs: enough samples for p99,
# few enough that 64 KiB (~2 ms a trip on TCG) stays around a second.
lat_iters() {
  if [ "$1" -le 4096 ]; then echo 500; elif [ "$1" -le 16384 ]; then echo 300; else echo 200; fi
}

# --- readiness: is the server of this pair listening yet? --------------------
# A perftest or rstream client started before its server listens fails or
# hangs, so every client waits for one of these. Each gets the server log.
ready_bench() { grep -qs '^listening ' "$1"; }
# (on the peer when the servers run there)
where_servers() { if [ -n "$PEER" ]; then on_peer "$@"; else "$@"; fi; }
ready_tcp_port() { where_servers ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }
ready_perftest() { ready_tcp_port "$PERFTEST_PORT"; }
ready_rstream() { where_servers rdma resource show cm_id 2>/dev/null | grep -q "state LISTEN .*:$RSTREAM_PORT "; }

wait_ready() {
  local check=$1 log=$2 deadline=$((SECONDS + LISTEN_WAIT_S))
  until "$check" "$log"; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.1
  done
}

# with_cpu FILE CMD...: runs CMD and writes bash's `times` to FILE: its
# second line is the CPU time (user, system) CMD used; CMD's status. A
# subshell, whose children's times start at zero (and `times` itself must
# not run in a pipeline: that would be another subshell, with none).
with_cpu() (
  file=$1
  shift
  "$@"
  rc=$?
  times >"$file"
  exit $rc
)

# on_server TAG CMD...: runs a server bounded by PAIR_TIMEOUT_S: here, or
# on the peer through perf/peer-server.sh (TAG names it there, for
# stop_server), ssh bounded a little later than the server, by peer.sh's
# grace. Not on_peer_within: peer-server.sh bounds the server itself, so
# that the CPU line it prints at the end comes after a timeout too.
on_server() {
  local tag=$1
  shift
  if [ -z "$PEER" ]; then timeout "$PAIR_TIMEOUT_S" "$@"; return; fi
  timeout $((PAIR_TIMEOUT_S + PEER_SSH_GRACE_S)) \
    ssh "${PEER_SSH_OPTIONS[@]}" "$PEER" "$(printf '%q ' "$HERE/peer-server.sh" "$tag" "$PAIR_TIMEOUT_S" "$@")"
}

# stop_server PID [TAG]: ends a server started by run_pair or pairs. PID is
# the background job: for run_pair a shell whose child is with_cpu's
# subshell, for pairs on_server's shell. What is stopped is the `timeout`
# below it (a child or a grandchild), which passes the signal on, so
# with_cpu still records the CPU time and exits; on the peer the server
# itself is stopped by TAG, and timeout ends the ssh that waits for it.
stop_server() {
  [ -n "$PEER" ] && [ -n "${2:-}" ] && on_peer "$HERE/peer-server.sh" stop "$2"
  local parent
  for parent in "$1" $(pgrep -P "$1"); do
    pkill -TERM -x -P "$parent" timeout 2>/dev/null
  done
}

# peer_cpu LOG FILE: a server's CPU time as perf/peer-server.sh printed it
# at the end of LOG, into FILE as with_cpu writes it.
peer_cpu() { sed -n '/^@@cpu$/{n;p;n;p;q}' "$1" >"$2"; }

# run_pair NAME READY_CHECK SERVER_CMD... -- CLIENT_CMD...
# Server and client each bounded by PAIR_TIMEOUT_S; output in OUT/NAME.*.log,
# the CPU time each used in OUT/NAME.*.cpu.
run_pair() {
  local name=$1 check=$2 server=() spid crc
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do server+=("$1"); shift; done
  shift
  local slog=$OUT/$name.server.log clog=$OUT/$name.client.log
  with_cpu "$OUT/$name.server.cpu" on_server "$name" "${server[@]}" >"$slog" 2>&1 &
  spid=$!
  if ! wait_ready "$check" "$slog"; then
    say "$name: the server did not listen within ${LISTEN_WAIT_S} s (see $slog)"
    stop_server "$spid" "$name"; wait "$spid" 2>/dev/null
    FAILED+=("${OUT##*/}/$name"); return 1
  fi
  with_cpu "$OUT/$name.client.cpu" timeout "$PAIR_TIMEOUT_S" "$@" >"$clog" 2>&1
  crc=$?
  # A server whose client failed would wait for another one: stop it.
  [ $crc -eq 0 ] || stop_server "$spid" "$name"
  wait "$spid" 2>/dev/null
  [ -z "$PEER" ] || peer_cpu "$slog" "$OUT/$name.server.cpu"
  if [ $crc -ne 0 ]; then
    say "$name: client exit status $crc (see $clog)"
    FAILED+=("${OUT##*/}/$name"); return 1
  fi
}

# --- one tool, one size ---------------------------------------------------------

# ours NAME MODE SIZE FLAGS...: one transport_bench server/client pair, on
# the next of BENCH_PORTS.
# OURS_ENV (an array of NAME=VALUE) is the environment of both processes.
OURS_ENV=()
ours() {
  local name=$1 mode=$2 size=$3; shift 3
  local port=$((BENCH_PORTS_FROM + BENCH_RUNS % BENCH_PORTS))
  BENCH_RUNS=$((BENCH_RUNS + 1))
  local budget=(--seconds "$OURS_BW_SECONDS")
  [ "$mode" = latency ] && budget=(--seconds "$OURS_LAT_SECONDS" --iters "$OURS_LAT_MAX_ITERS")
  run_pair "$name-$size" ready_bench \
    env "${OURS_ENV[@]}" "$BENCH" server --addr "$SERVER_IP" --port "$port" "$@" -- \
    env "${OURS_ENV[@]}" "$BENCH" client --addr "$SERVER_IP" --port "$port" "$@" --mode "$mode" \
    --sizes "$size" "${budget[@]}"
}

# rsocket NAME MODE SIZE FLAGS...: ours with --rsocket.
rsocket() {
  local name=$1 mode=$2 size=$3; shift 3
  ours "$name" "$mode" "$size" --rsocket "$@"
}

# ours_vcopy NAME MODE SIZE FLAGS...: ours with memcpy kept on vector
# moves (ours sees this OURS_ENV: bash's locals are visible to the callee).
ours_vcopy() {
  [ "$3" -ge "$VCOPY_MIN_SIZE" ] || return 0
  local OURS_ENV=("$VCOPY_ENV")
  ours "$@"
}

# copy_speed as is and with VCOPY_ENV, each bounded like any measurement.
copy_speeds() {
  say "memcpy speed (copy_speed)"
  timeout "$PAIR_TIMEOUT_S" "$COPY_SPEED" >"$RAW/copy.memcpy.log" 2>&1 || FAILED+=(copy_speed)
  timeout "$PAIR_TIMEOUT_S" env "$VCOPY_ENV" "$COPY_SPEED" >"$RAW/copy.vector.log" 2>&1 ||
    FAILED+=(copy_speed_vector)
}

# glibc's threshold above which memcpy uses `rep movsb`, in bytes (empty if
# this glibc cannot say: --list-tunables came with 2.33).
rep_movsb_threshold() {
  local hex
  hex=$(/lib64/ld-linux-x86-64.so.2 --list-tunables 2>/dev/null |
    sed -n 's/^glibc\.cpu\.x86_rep_movsb_threshold: \(0x[0-9a-f]*\).*/\1/p')
  [ -n "$hex" ] && printf '%d' "$hex"
}

# perftest NAME TOOL SIZE OPTIONS...: server and client take the same
# options; -F skips the cpufreq check, which means nothing in a guest.
perftest() {
  local name=$1 tool=$2 size=$3; shift 3
  local args=(-p "$PERFTEST_PORT" -F -s "$size" "$@")
  run_pair "$name-$size" ready_perftest "$tool" -d "$PEER_DEV" "${args[@]}" -- \
    "$tool" -d "$RXE_DEV" "${args[@]}" "$SERVER_IP"
}

# rstream: -S size, -C transfers each way per iteration, -I iterations; the
# server needs the same numbers. Default mode: non-blocking calls, busy-poll.
rstream_pair() {
  local name=$1 size=$2; shift 2
  local args=(-f ip -p "$RSTREAM_PORT" -S "$size" "$@")
  # rstream prints no count: the report's CPU per message needs it. Each
  # iteration moves -C transfers one way, then back.
  local transfers=1 iterations=1 i
  for ((i = 1; i < $#; i++)); do
    case ${!i} in
      -C) transfers=${*:i+1:1} ;;
      -I) iterations=${*:i+1:1} ;;
    esac
  done
  echo "messages=$((2 * transfers * iterations))" >"$OUT/$name-$size.plan"
  run_pair "$name-$size" ready_rstream rstream "${args[@]}" -- rstream -s "$SERVER_IP" "${args[@]}"
}

# pair_port TOOL N: the port of TOOL's Nth pair.
pair_port() {
  case $1 in
    ours) echo $((PAIRS_OURS_PORT + $2)) ;;
    tcp) echo $((PAIRS_TCP_PORT + $2)) ;;
    ib_send_lat_e) echo $((PAIRS_PERFTEST_PORT + $2)) ;;
  esac
}

# pairs TOOL: PAIRS server/client pairs of TOOL (ours, tcp, ib_send_lat_e)
# at once, each PAIRS_ROUND_TRIPS round trips of PAIRS_SIZE bytes; logs in
# OUT/pairs-TOOL-N.{server,client}.log, and in OUT/pairs-TOOL-N.wall each
# client's start and end (ns since the epoch). All servers listen before
# any client starts. report.py adds up the pairs' round trips per second.
# No CPU times here: 16 processes share the CPUs by design.
pairs() {
  local tool=$1 i pid port server client spids=() cpids=() failed=0 deadline
  local bench_flags=() perftest_args=(-F -s "$PAIRS_SIZE" -n "$PAIRS_ROUND_TRIPS" -e)
  [ "$tool" = tcp ] && bench_flags=(--tcp)
  say "round ${OUT##*/r}: $PAIRS pairs at once, $tool"
  for ((i = 1; i <= PAIRS; i++)); do
    port=$(pair_port "$tool" "$i")
    case $tool in
      ours | tcp) server=("$BENCH" server --addr "$SERVER_IP" --port "$port" "${bench_flags[@]}") ;;
      ib_send_lat_e) server=(ib_send_lat -d "$PEER_DEV" -p "$port" "${perftest_args[@]}") ;;
    esac
    on_server "pairs-$tool-$i" "${server[@]}" >"$OUT/pairs-$tool-$i.server.log" 2>&1 &
    spids+=($!)
  done
  # One deadline for all the servers: a tool that cannot listen at all
  # costs LISTEN_WAIT_S, not that for each pair.
  deadline=$((SECONDS + LISTEN_WAIT_S))
  for ((i = 1; i <= PAIRS && failed == 0; i++)); do
    until case $tool in
            ours | tcp) ready_bench "$OUT/pairs-$tool-$i.server.log" ;;
            ib_send_lat_e) ready_tcp_port "$(pair_port "$tool" "$i")" ;;
          esac; do
      [ $SECONDS -lt "$deadline" ] || { say "pairs $tool: server $i did not listen within ${LISTEN_WAIT_S} s"; failed=1; break; }
      sleep 0.1
    done
  done
  if [ $failed = 0 ]; then
    for ((i = 1; i <= PAIRS; i++)); do
      port=$(pair_port "$tool" "$i")
      case $tool in
        # transport_bench's latency mode: PAIRS_ROUND_TRIPS round trips
        # unless its own time budget ends first, well before the kill.
        ours | tcp) client=("$BENCH" client --addr "$SERVER_IP" --port "$port" "${bench_flags[@]}" --mode latency
                            --sizes "$PAIRS_SIZE" --iters "$PAIRS_ROUND_TRIPS" --seconds $((PAIR_TIMEOUT_S / 2))) ;;
        ib_send_lat_e) client=(ib_send_lat -d "$RXE_DEV" -p "$port" "${perftest_args[@]}" "$SERVER_IP") ;;
      esac
      (
        wall=$OUT/pairs-$tool-$i.wall
        date +%s%N >"$wall"
        timeout "$PAIR_TIMEOUT_S" "${client[@]}" >"$OUT/pairs-$tool-$i.client.log" 2>&1
        rc=$?
        date +%s%N >>"$wall"
        exit $rc
      ) &
      cpids+=($!)
    done
    for pid in "${cpids[@]}"; do wait "$pid" || failed=1; done
  fi
  # A server whose client failed (or never came) would wait for one.
  [ $failed = 0 ] || for i in "${!spids[@]}"; do stop_server "${spids[i]}" "pairs-$tool-$((i + 1))"; done
  wait "${spids[@]}" 2>/dev/null
  [ $failed = 0 ] || { say "pairs $tool: a pair failed (see $OUT/pairs-$tool-*.log)"; FAILED+=("${OUT##*/}/pairs-$tool"); }
}

# --- a round: every tool at one size before the next size ------------------------
# so that each ratio compares figures taken close together in time: a host
# that gets busy halfway through then skews a size, not one tool.

latency_size() {
  local size=$1
  say "round ${OUT##*/r}: latency $size B"
  ours ours-lat latency "$size"
  ours ours-lat-spin latency "$size" --spin
  ours_vcopy ours-lat-vcopy latency "$size"
  ours_vcopy ours-lat-spin-vcopy latency "$size" --spin
  ours tcp-lat latency "$size" --tcp
  perftest ib_write_lat ib_write_lat "$size" -n "$(lat_iters "$size")"
  perftest ib_send_lat ib_send_lat "$size" -n "$(lat_iters "$size")"
  perftest ib_send_lat_e ib_send_lat "$size" -n "$(lat_iters "$size")" -e
  rstream_pair rstream-lat "$size" -C 1 -I "$(lat_iters "$size")"
  rsocket rsocket-lat latency "$size"
  rsocket rsocket-lat-spin latency "$size" --spin
}

bandwidth_size() {
  local size=$1
  say "round ${OUT##*/r}: bandwidth $size B"
  ours ours-bw bandwidth "$size"
  ours ours-bw-spin bandwidth "$size" --spin
  ours_vcopy ours-bw-vcopy bandwidth "$size"
  ours_vcopy ours-bw-spin-vcopy bandwidth "$size" --spin
  ours tcp-bw bandwidth "$size" --tcp
  perftest ib_write_bw ib_write_bw "$size" -n $((IB_BW_BYTES / size))
  perftest ib_send_bw ib_send_bw "$size" -n $((IB_BW_BYTES / size))
  perftest ib_send_bw_e ib_send_bw "$size" -n $((IB_BW_BYTES / size)) -e
  rstream_pair rstream-bw "$size" -C $((RSTREAM_BW_BYTES / size)) -I 1
  rsocket rsocket-bw bandwidth "$size"
  rsocket rsocket-bw-spin bandwidth "$size" --spin
}

# The counted round: the same measurements as a round's, less those
# that busy-poll (see the top).
counted_latency_size() {
  local size=$1
  say "round ${OUT##*/r}: latency $size B (counted)"
  ours ours-lat latency "$size"
  ours tcp-lat latency "$size" --tcp
  perftest ib_send_lat_e ib_send_lat "$size" -n "$(lat_iters "$size")" -e
  rsocket rsocket-lat latency "$size"
}

counted_bandwidth_size() {
  local size=$1
  say "round ${OUT##*/r}: bandwidth $size B (counted)"
  ours ours-bw bandwidth "$size"
  ours tcp-bw bandwidth "$size" --tcp
  perftest ib_write_bw ib_write_bw "$size" -n $((IB_BW_BYTES / size))
  perftest ib_send_bw_e ib_send_bw "$size" -n $((IB_BW_BYTES / size)) -e
  rsocket rsocket-bw bandwidth "$size"
}

counted_round() {
  local size tool
  for size in $LAT_SIZES; do counted_latency_size "$size"; done
  for size in $BW_SIZES; do counted_bandwidth_size "$size"; done
  for tool in tcp ours ib_send_lat_e; do pairs "$tool"; done
}

run_round() {
  local size
  OUT=$RAW/r$1
  mkdir -p "$OUT" || exit 1
  [ "$COUNTED" = 1 ] && { counted_round; return; }
  perftest ib_write_lat ib_write_lat "$PERFTEST_FLOOR_SIZE" -n "$(lat_iters "$PERFTEST_FLOOR_SIZE")"
  for size in $LAT_SIZES; do latency_size "$size"; done
  for size in $BW_SIZES; do bandwidth_size "$size"; done
  # Odd rounds TCP first, even rounds last: neither side always goes first.
  local tool tools="tcp ours ib_send_lat_e"
  [ $(($1 % 2)) = 0 ] && tools="ib_send_lat_e ours tcp"
  for tool in $tools; do pairs "$tool"; done
}

write_env() {
  {
    echo "device=$RXE_DEV"
    echo "address=$SERVER_IP"
    echo "kernel=$(uname -r)"
    [ -z "$PEER" ] || peer_env_lines
    echo "clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
    echo "cpus=$(nproc)"
    echo "started=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "guest=${PG_RDMA_GUEST:-unknown}"
    echo "rounds=$ROUNDS"
    echo "counted=$COUNTED"
    # scripts/bench passes the host's load: a busy host stalls the guest's
    # vCPUs and makes every figure noisy, ratios included.
    echo "host_load_before=${PG_RDMA_BENCH_HOST_LOAD:-unknown}"
    echo "raw_logs=$RAW"
    echo "rep_movsb_threshold=$(rep_movsb_threshold)"
    # rsocket's behaviour (rsocket_stream.cpp) and rstream come with it.
    echo "librdmacm=$(dpkg-query -W -f='${Version}' librdmacm1 2>/dev/null)"
    echo "pairs=$PAIRS"
    echo "pairs_size=$PAIRS_SIZE"
    echo "pairs_round_trips=$PAIRS_ROUND_TRIPS"
  } >"$RAW/env.txt"
}

main() {
  [[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { say "PG_RDMA_BENCH_ROUNDS must be a positive number"; exit 2; }
  [ -x "$BENCH" ] || { say "no $BENCH: build the project first"; exit 1; }
  [ -x "$COPY_SPEED" ] || { say "no $COPY_SPEED: build the project first"; exit 1; }
  mkdir -p "$RAW" || exit 1
  write_env
  local start=$SECONDS round round_start round_s slowest=0 rounds_run=0
  "$BENCH" settings >"$RAW/settings.log" 2>&1 || FAILED+=(settings)
  [ "$COUNTED" = 1 ] || copy_speeds
  for ((round = 1; round <= ROUNDS; round++)); do
    round_start=$SECONDS
    run_round "$round"
    rounds_run=$round
    round_s=$((SECONDS - round_start))
    [ $round_s -gt $slowest ] && slowest=$round_s
    if [ $round -lt "$ROUNDS" ] &&
       [ $((SECONDS - start + slowest * (100 + ROUND_MARGIN_PERCENT) / 100)) -gt $RUN_BUDGET_S ]; then
      say "round $round took $round_s s; another would end past the run's ${RUN_BUDGET_S} s: no more rounds"
      break
    fi
  done
  {
    echo "rounds_run=$rounds_run"
    echo "failed=${FAILED[*]}"
    echo "duration_s=$((SECONDS - start))"
  } >>"$RAW/env.txt"
  if [ "$COUNTED" = 1 ]; then
    python3 "$HERE/counted_report.py" "$RAW" "$OUT_JSON" || exit 1
  else
    python3 "$HERE/report.py" "$RAW" "$OUT_JSON" || exit 1
  fi
  echo "$OUT_JSON"
}

main; exit  # exit on the same line: an edit of this file during a run is not read as more commands
