#!/usr/bin/env bash
# perf/run-db-bench.sh BUILD_DIR [OUT_JSON]
#
# Runs INSIDE the Soft-RoCE guest (scripts/bench db starts it through
# regress/rxe-guest, which exports RXE_DEV and RXE_IP and sets ulimit -l
# unlimited). Starts PostgreSQL 15 with the built pg_rdma (regress/pg) and
# measures, over RDMA (libpq_rdma.so, with_rsocket=require) and over TCP
# (plain libpq) to the same server and address, each figure in rounds of
# one run per transport (TCP, RDMA; RDMA, TCP; TCP, RDMA), after a CHECKPOINT:
#   pgbench -S, 1 client (latency, tps) and 8 clients (tps); TPC-B-like, 8
#   clients (tps); pgbench -S -C (a new connection per transaction);
#   COPY out and in of a table of about 110 MB, pg_dump of it, in MB/s;
#   pg_basebackup (tar, default -X stream) of the whole cluster, MB/s;
#   CPU time of the client process tree, of the server's backends (what the
#   postmaster reaped) and of the whole guest (kernel and rxe included),
#   per MB and per transaction; before each COPY out, the client CPU of the
#   same command copying no rows (the session's own cost);
# and ib_write_bw at 1 MiB on RXE_DEV, the device's ceiling, to say what
# fraction of it each bulk transfer reached. perf/db_report.py prints the
# table, writes OUT_JSON (default perf/results/db-<UTC time>.json) and a PNG
# chart of the ratios beside it. Raw output stays in OUT_JSON's name without
# .json. A measurement that fails is reported as missing and the run goes
# on. The last line printed is the JSON path.
# Environment: PG_RDMA_BENCH_HOST_LOAD (set by scripts/bench),
# PG_RDMA_DB_BENCH_SECONDS (per pgbench run, default 10),
# PG_RDMA_DB_BENCH_ROUNDS (rounds per figure, 2 to 9, default 3),
# PG_RDMA_BENCH_COUNTED (1: scripts/bench db --counted, a guest whose clock
# counts instructions: pgbench's figures repeat, so 2 rounds of 3
# counted seconds by default; each counted second takes about 8 on the
# host).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
readonly HERE ROOT

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  sed -n '2,30s/^# \{0,1\}//p' "$0" >&2
  exit 2
fi
BUILD=$(cd "$1" && pwd) || exit 2
OUT_JSON=${2:-$HERE/results/db-$(date -u +%Y%m%dT%H%M%SZ).json}
RAW=${OUT_JSON%.json}
SO=$BUILD/libclient/preload/libpq_rdma.so
: "${RXE_IP:?run me inside the Soft-RoCE guest (regress/rxe-guest): RXE_IP is not set}"
RXE_DEV=${RXE_DEV:-rxe0}
readonly BUILD OUT_JSON RAW SO

# --- what is measured ----------------------------------------------------------
readonly COUNTED=${PG_RDMA_BENCH_COUNTED:-0}
DEFAULT_SECONDS=10 DEFAULT_ROUNDS=3
[ "$COUNTED" = 1 ] && DEFAULT_SECONDS=3 DEFAULT_ROUNDS=2
readonly PGBENCH_SECONDS=${PG_RDMA_DB_BENCH_SECONDS:-$DEFAULT_SECONDS}
# Three rounds: with two, one round's ratio on each side of a target left
# it undecided, and the guest's speed moves a round by 10-30 % and more.
# Counted, two, one with each transport first: counted figures repeat
# from run to run, but a round's order moves them (the second finds
# what the first left), the same way each time.
ROUNDS=${PG_RDMA_DB_BENCH_ROUNDS:-$DEFAULT_ROUNDS}
case $ROUNDS in [2-9]) ;; *) echo "PG_RDMA_DB_BENCH_ROUNDS: 2 to 9, not '$ROUNDS'" >&2; exit 2 ;; esac
readonly ROUNDS
readonly PGBENCH_SCALE=8             # ~120 MB of pgbench tables; 8 branches for 8 clients
readonly COPY_ROWS=1100000           # ~110 MB of COPY text (~100 B a row)
readonly MANY_CLIENTS=8 THREADS=2    # the guest has 2 vCPUs
readonly IB_BW_SIZE=$((1 << 20)) IB_BW_BYTES=$((256 << 20))
readonly STEP_TIMEOUT_S=120          # any one client run (a pgbench run takes PGBENCH_SECONDS)
readonly PERFTEST_PORT=18515 LISTEN_WAIT_S=30
PG_CLUSTER_PORT=54500  # regress/pg reads it

say() { echo "bench: $*" >&2; }
FAILED=()
RESULTS=''  # "key value" lines, read by db_report.py

record() { echo "$1 $2" >>"$RESULTS"; }
# ratio A B [SCALE] [DIGITS]: A * SCALE / B, or nothing when B is 0.
ratio() { awk -v a="$1" -v b="$2" -v k="${3:-1}" -v d="${4:-2}" 'BEGIN { if (b > 0) printf "%.*f", d, a * k / b }'; }
# ticks_s BEFORE AFTER HZ: the seconds between two readings of a tick counter.
ticks_s() { awk -v a="$1" -v b="$2" -v hz="$3" 'BEGIN { printf "%.3f", (b - a) / hz }'; }

# --- the server ------------------------------------------------------------------
# shellcheck source=regress/pg/cluster.sh
. "$ROOT/regress/pg/cluster.sh"

start_server() {
  # fsync off: the guest's disk is RAM, and both transports meet the same
  # server; the figures are about moving bytes, not about durability.
  # autovacuum off: a vacuum set off by one step's writes must not land in
  # the next step's timing (VACUUM runs once, outside any timing).
  pg_cluster_init "$(mktemp -d /tmp/pg_rdma-dbbench.XXXXXX)" "$BUILD" \
    "fsync = off" "shared_buffers = 256MB" "max_wal_size = 2GB" "autovacuum = off" \
    "log_connections = off" "log_disconnections = off" || return 1
  pg_cluster_start || return 1
  pg_cluster_set_password postgres secret || return 1
  pg_cluster_psql -c 'create extension pg_rdma' >/dev/null
}

postmaster() { head -n 1 "$PG_CLUSTER_DATA/postmaster.pid"; }

# CPU ticks of the server's exited processes: the postmaster's cutime and
# cstime, which hold every backend (and walsender) it reaped. The
# long-lived processes (checkpointer, walwriter...) are left out.
reaped_ticks() { awk '{ sub(/^.*\) /, ""); print $14 + $15 }' "/proc/$(postmaster)/stat"; }
# ... of them in user space (cutime alone).
reaped_user_ticks() { awk '{ sub(/^.*\) /, ""); print $14 }' "/proc/$(postmaster)/stat"; }

# Busy ticks of the whole guest from /proc/stat (all but idle and iowait):
# the kernel's share too, where rxe does its copies and CRCs (softirq,
# kworkers), which no process is charged for.
guest_ticks() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
# ... and of them, the user-space share (user, nice): every process's own
# code, ours (libpq_rdma.so, pg_rdma.so) included, and its busy-polls. The
# rest is the kernel's: system calls, where rxe runs a whole transfer
# inside the sender's post over loopback, and interrupts and softirqs.
guest_user_ticks() { awk '$1 == "cpu" { print $2 + $3 }' /proc/stat; }

# Context switches of the whole guest, and of its softirq threads alone.
# rxe in Debian 12's kernel (6.1) hands every completion event to a
# tasklet; raised from a process (the sender's post, which rxe runs inline
# over loopback) that means waking ksoftirqd, which preempts the sender.
# These show that cost per transaction (perf/FINDINGS.md).
guest_switches() { awk '$1 == "ctxt" { print $2 }' /proc/stat; }
softirqd_switches() {
  # shellcheck disable=SC2046  # one path per thread
  awk '/ctxt_switches:/ { s += $2 } END { print s + 0 }' $(pgrep '^ksoftirqd/' | sed 's|.*|/proc/&/status|') /dev/null
}
# ... and the CPU ticks those threads spent (user + system).
softirqd_ticks() {
  # shellcheck disable=SC2046  # one path per thread
  awk '{ sub(/^.*\) /, ""); s += $12 + $13 } END { print s + 0 }' $(pgrep '^ksoftirqd/' | sed 's|.*|/proc/&/stat|') /dev/null
}

# Waits until only the server's own processes are left (the client's
# backends exited and were reaped, so their CPU is in reaped_ticks).
wait_backends_gone() {
  local until=$((SECONDS + 20))
  while [ "$(pgrep -P "$(postmaster)" | wc -l)" -gt "$BASE_CHILDREN" ]; do
    [ $SECONDS -lt $until ] || { say "backends still there after 20 s: CPU figures may be short"; return 1; }
    sleep 0.05
  done
}

# --- running a client -------------------------------------------------------------
# client TRANSPORT OUT CMD [ARG...]: runs a client program as the postgres
# user (regress/pg), through libpq_rdma.so with WITH_RSOCKET=require for
# rdma, plain for tcp. Its stdout goes to OUT, its stderr to OUT.err. Sets
# WALL_S, CLIENT_CPU_S (user + system of the client's process tree),
# SERVER_CPU_S (the backends it used), GUEST_CPU_S (everything, kernel
# included), GUEST_SWITCHES and SOFTIRQD_SWITCHES (context switches),
# SOFTIRQD_CPU_S (what the softirq threads ran), and the user-space part of
# three of them: CLIENT_USER_S, SERVER_USER_S, GUEST_USER_S.
client() {
  local transport=$1 out=$2; shift 2
  local pre=() t0 t1 s0 s1 g0 g1 c0 c1 k0 k1 q0 q1 u0 u1 v0 v1 cpu hz
  # require: a session that cannot use RDMA fails instead of falling back.
  [ "$transport" = rdma ] && pre=(env LD_PRELOAD="$SO" WITH_RSOCKET=require)
  wait_backends_gone
  # Dirty buffers of the last step are written now, not inside this one.
  pg_cluster_psql -c checkpoint >/dev/null
  wait_backends_gone
  s0=$(reaped_ticks) g0=$(guest_ticks) c0=$(guest_switches) k0=$(softirqd_switches) q0=$(softirqd_ticks)
  u0=$(reaped_user_ticks) v0=$(guest_user_ticks)
  t0=$(date +%s%N)
  # times: the subshell's children's user and system time, once they exit.
  cpu=$( (pg_cluster_client timeout "$STEP_TIMEOUT_S" "${pre[@]}" "$@" >"$out" 2>"$out.err"
          echo $? >"$out.rc"
          times) | awk 'NR == 2 { print }')
  t1=$(date +%s%N)
  wait_backends_gone
  s1=$(reaped_ticks) g1=$(guest_ticks) c1=$(guest_switches) k1=$(softirqd_switches) q1=$(softirqd_ticks)
  u1=$(reaped_user_ticks) v1=$(guest_user_ticks)
  hz=$(getconf CLK_TCK)
  GUEST_SWITCHES=$((c1 - c0)) SOFTIRQD_SWITCHES=$((k1 - k0))
  WALL_S=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
  CLIENT_CPU_S=$(echo "$cpu" | awk '{ n = 0; for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); n += p[1] * 60 + p[2] } printf "%.3f", n }')
  CLIENT_USER_S=$(echo "$cpu" | awk '{ split($1, p, /[ms]/); printf "%.3f", p[1] * 60 + p[2] }')
  SERVER_USER_S=$(ticks_s "$u0" "$u1" "$hz")
  GUEST_USER_S=$(ticks_s "$v0" "$v1" "$hz")
  SERVER_CPU_S=$(ticks_s "$s0" "$s1" "$hz")
  GUEST_CPU_S=$(ticks_s "$g0" "$g1" "$hz")
  SOFTIRQD_CPU_S=$(ticks_s "$q0" "$q1" "$hz")
  [ "$(cat "$out.rc")" = 0 ] || return 1
  # A library the loader could not preload leaves plain libpq, which
  # ignores WITH_RSOCKET: that run would be TCP under the rdma name.
  ! grep -q 'cannot be preloaded' "$out.err"
}

# The rdma figures must be RDMA's: one session through the same path says
# what pg_stat_rdma sees for it before any of them is measured.
check_rdma_path() {
  local seen
  seen=$(pg_cluster_client env LD_PRELOAD="$SO" WITH_RSOCKET=require psql -X -At \
    -c 'select transport from pg_stat_rdma where pid = pg_backend_pid()' 2>&1)
  [ "$seen" = rdma ] || { say "a session through libpq_rdma.so is not on RDMA (saw: $seen)"; return 1; }
}

# --- measurements ----------------------------------------------------------------
# Every function below takes NAME TRANSPORT ROUND and records
# NAME.TRANSPORT.rROUND.FIGURE values.

pgbench_run() {  # NAME TRANSPORT ROUND PGBENCH_ARGS...
  local name=$1 transport=$2 round=$3; shift 3
  local out=$RAW/$name-$transport-r$round.log key
  key=$name.$transport.r$round
  say "$name over $transport (round $round)"
  if ! client "$transport" "$out" pgbench -n -T "$PGBENCH_SECONDS" "$@"; then
    say "$name over $transport failed (see $out.err)"; FAILED+=("$name-$transport-r$round"); return 1
  fi
  local tps lat tx setup
  tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$out")
  lat=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' "$out")
  tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out")
  setup=$(sed -n 's/^average connection time = \([0-9.]*\) ms/\1/p' "$out")
  if [ -z "$tps" ] || [ -z "$tx" ] || [ "$tx" -eq 0 ]; then FAILED+=("$name-$transport-r$round"); return 1; fi
  record "$key.tps" "$tps"
  [ -n "$lat" ] && record "$key.latency_ms" "$lat"
  [ -n "$setup" ] && record "$key.connection_ms" "$setup"
  record "$key.client_cpu_us_per_tx" "$(ratio "$CLIENT_CPU_S" "$tx" 1e6 1)"
  record "$key.server_cpu_us_per_tx" "$(ratio "$SERVER_CPU_S" "$tx" 1e6 1)"
  record "$key.guest_cpu_us_per_tx" "$(ratio "$GUEST_CPU_S" "$tx" 1e6 1)"
  record "$key.guest_switches_per_tx" "$(ratio "$GUEST_SWITCHES" "$tx" 1 3)"
  record "$key.softirqd_switches_per_tx" "$(ratio "$SOFTIRQD_SWITCHES" "$tx" 1 3)"
  record "$key.softirqd_cpu_us_per_tx" "$(ratio "$SOFTIRQD_CPU_S" "$tx" 1e6 1)"
  record "$key.client_user_us_per_tx" "$(ratio "$CLIENT_USER_S" "$tx" 1e6 1)"
  record "$key.server_user_us_per_tx" "$(ratio "$SERVER_USER_S" "$tx" 1e6 1)"
  record "$key.guest_user_us_per_tx" "$(ratio "$GUEST_USER_S" "$tx" 1e6 1)"
}

# session_cpu NAME TRANSPORT ROUND CMD...: the client CPU of CMD, the same
# command as the bulk transfer that follows it but moving nothing: starting
# the client and setting up its session (over RDMA also loading the verbs
# libraries, into Debian's perl wrapper and psql both, and setting up the
# queue pair: 0.1-0.3 s more of the guest's CPU than over TCP, mostly per
# process rather than per connection; perf/FINDINGS-archive.md). The next bulk()
# records its client CPU per MB past it too: how much of the whole run's
# figure (the target's) is the session and how much the bytes.
SESSION_CPU_S=''
session_cpu() {
  local name=$1 transport=$2 round=$3; shift 3
  local out=$RAW/$name-session-$transport-r$round.log
  SESSION_CPU_S=''
  say "$name over $transport (round $round): the session alone"
  if ! client "$transport" "$out" "$@"; then
    say "$name's session over $transport failed (see $out.err)"; FAILED+=("$name-session-$transport-r$round"); return 1
  fi
  SESSION_CPU_S=$CLIENT_CPU_S
  record "$name.$transport.r$round.session_client_cpu_ms" "$(ratio "$CLIENT_CPU_S" 1 1e3 0)"
}

# bulk NAME TRANSPORT ROUND BYTES CMD...: a timed bulk transfer of BYTES
# ("-": the size of BULK_DIR afterwards, which is then removed).
bulk() {
  local name=$1 transport=$2 round=$3 bytes=$4; shift 4
  local out=$RAW/$name-$transport-r$round.log key=$name.$transport.r$round
  # A session measured for this transfer is this transfer's alone, whatever
  # becomes of it.
  local session_cpu=$SESSION_CPU_S
  SESSION_CPU_S=''
  say "$name over $transport (round $round)"
  if ! client "$transport" "$out" "$@"; then
    say "$name over $transport failed (see $out.err)"; FAILED+=("$name-$transport-r$round"); return 1
  fi
  if [ "$bytes" = - ]; then
    bytes=$(du -sb "$BULK_DIR" | cut -f1)
    rm -rf "$BULK_DIR"
  fi
  local mb
  mb=$(ratio "$bytes" 1048576 1 3)
  record "$key.mb" "$mb"
  record "$key.seconds" "$WALL_S"
  record "$key.mb_per_s" "$(ratio "$mb" "$WALL_S")"
  record "$key.client_cpu_ms_per_mb" "$(ratio "$CLIENT_CPU_S" "$mb" 1e3)"
  if [ -n "$session_cpu" ] && awk -v a="$CLIENT_CPU_S" -v b="$session_cpu" 'BEGIN { exit !(a > b) }'; then
    record "$key.client_cpu_past_session_ms_per_mb" \
      "$(ratio "$(awk -v a="$CLIENT_CPU_S" -v b="$session_cpu" 'BEGIN { print a - b }')" "$mb" 1e3)"
  fi
  record "$key.server_cpu_ms_per_mb" "$(ratio "$SERVER_CPU_S" "$mb" 1e3)"
  record "$key.guest_cpu_ms_per_mb" "$(ratio "$GUEST_CPU_S" "$mb" 1e3)"
}

# Each figure in ROUNDS rounds of one run per transport, the order turned
# every round (TCP, RDMA; RDMA, TCP; ...), so that neither transport always
# goes first: db_report.py takes RDMA/TCP within each round, and a steady
# drift of the machine's speed moves consecutive rounds' ratios in
# opposite directions.
both() {
  local fn=$1 name=$2 round; shift 2
  for ((round = 1; round <= ROUNDS; round++)); do
    if ((round % 2 == 1)); then
      "$fn" "$name" tcp "$round" "$@"
      "$fn" "$name" rdma "$round" "$@"
    else
      "$fn" "$name" rdma "$round" "$@"
      "$fn" "$name" tcp "$round" "$@"
    fi
  done
}

make_data() {
  say "data: pgbench -i -s $PGBENCH_SCALE, a $COPY_ROWS-row COPY table"
  pg_cluster_client pgbench -i -q -s "$PGBENCH_SCALE" >"$RAW/pgbench-init.log" 2>&1 || return 1
  pg_cluster_psql >/dev/null <<SQL || return 1
create table copybench as
  select g as id, repeat(md5(g::text), 3) as payload from generate_series(1, $COPY_ROWS) g;
create table copybench_in (like copybench);
vacuum analyze;
SQL
  COPY_FILE=$PG_CLUSTER_WORK/copybench.data
  pg_cluster_psql -c "\\copy copybench to '$COPY_FILE'" >/dev/null || return 1
  COPY_BYTES=$(stat -c %s "$COPY_FILE")
  DUMP_BYTES=$(pg_cluster_client pg_dump -t copybench | wc -c)
}

copy_out() {  # the COPY text goes to /dev/null on the client
  session_cpu "$1" "$2" "$3" psql -X -v ON_ERROR_STOP=1 -c "\\copy (select * from copybench limit 0) to '/dev/null'"
  bulk "$1" "$2" "$3" "$COPY_BYTES" psql -X -v ON_ERROR_STOP=1 -c "\\copy copybench to '/dev/null'"
}
copy_in() {
  pg_cluster_psql -c 'truncate copybench_in' >/dev/null
  bulk "$1" "$2" "$3" "$COPY_BYTES" psql -X -v ON_ERROR_STOP=1 -c "\\copy copybench_in from '$COPY_FILE'"
}
dump() { bulk "$1" "$2" "$3" "$DUMP_BYTES" pg_dump -t copybench -f /dev/null; }
basebackup() {  # tar format, pg_basebackup's default -X stream
  BULK_DIR=$PG_CLUSTER_WORK/backup
  rm -rf "$BULK_DIR"
  bulk "$1" "$2" "$3" - pg_basebackup -D "$BULK_DIR" -Ft -c fast
}

# ib_write_bw at 1 MiB: the device's ceiling for bulk transfers, this run.
ib_write_bw_ceiling() {
  local args=(-d "$RXE_DEV" -p "$PERFTEST_PORT" -F -s "$IB_BW_SIZE" -n $((IB_BW_BYTES / IB_BW_SIZE)))
  say "ib_write_bw ${IB_BW_SIZE} B"
  timeout 120 ib_write_bw "${args[@]}" >"$RAW/ib_write_bw.server.log" 2>&1 &
  local spid=$! until=$((SECONDS + LISTEN_WAIT_S))
  until ss -Hltn "sport = :$PERFTEST_PORT" 2>/dev/null | grep -q .; do
    [ $SECONDS -lt $until ] || { kill $spid; FAILED+=(ib_write_bw); return 1; }
    sleep 0.1
  done
  timeout 120 ib_write_bw "${args[@]}" "$RXE_IP" >"$RAW/ib_write_bw.client.log" 2>&1
  wait $spid
  # The result line: size, iterations, peak, average (MB/sec), msg rate.
  local avg
  avg=$(awk -v s="$IB_BW_SIZE" '$1 == s && NF >= 5 { print $4 }' "$RAW/ib_write_bw.client.log" | tail -n 1)
  [ -n "$avg" ] || { FAILED+=(ib_write_bw); return 1; }
  record ib_write_bw.mb_per_s "$avg"
}

write_env() {
  {
    echo "device=$RXE_DEV"
    echo "address=$RXE_IP"
    echo "kernel=$(uname -r)"
    echo "clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
    echo "cpus=$(nproc)"
    echo "started=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "postgres=$("$PG_CLUSTER_BIN/postgres" --version)"
    echo "pgbench_seconds=$PGBENCH_SECONDS"
    echo "counted=$COUNTED"
    echo "pgbench_scale=$PGBENCH_SCALE"
    echo "host_load_before=${PG_RDMA_BENCH_HOST_LOAD:-unknown}"
    echo "raw_logs=$RAW"
  } >"$RAW/env.txt"
}

main() {
  [ -f "$SO" ] || { say "no $SO: build the project first"; exit 1; }
  mkdir -p "$RAW" || exit 1
  RESULTS=$RAW/results.txt
  : >"$RESULTS"
  trap pg_cluster_cleanup EXIT
  local start=$SECONDS
  start_server || { say "the server did not start"; exit 1; }
  write_env
  make_data || { say "could not make the data"; exit 1; }
  check_rdma_path || exit 1
  BASE_CHILDREN=$(pgrep -P "$(postmaster)" | wc -l)
  ib_write_bw_ceiling
  both pgbench_run select_1 -S -c 1
  both pgbench_run select_8 -S -c "$MANY_CLIENTS" -j "$THREADS"
  both pgbench_run tpcb_8 -c "$MANY_CLIENTS" -j "$THREADS"
  both pgbench_run connect_1 -S -C -c 1
  both copy_out copy_out
  both copy_in copy_in
  both dump pg_dump
  both basebackup pg_basebackup
  {
    echo "failed=${FAILED[*]}"
    echo "duration_s=$((SECONDS - start))"
  } >>"$RAW/env.txt"
  python3 "$HERE/db_report.py" "$RAW" "$OUT_JSON" || exit 1
  echo "$OUT_JSON"
}

# exit on the same line: bash reads a script as it runs it, and an edit of
# this file during a run must not be read as more commands once main returns.
main; exit
