#!/usr/bin/env bash
# perf/run-db-bench.sh BUILD_DIR [OUT_JSON]
#
# Runs INSIDE the Soft-RoCE guest (scripts/bench db starts it through
# regress/rxe-guest, which exports RXE_DEV and RXE_IP and sets ulimit -l
# unlimited). Starts PostgreSQL 15 with the built pg_rdma (regress/pg) and
# measures, over RDMA (libpq_rdma.so, with_rsocket=require) and over TCP
# (plain libpq) to the same server and address, each pair back to back:
#   pgbench -S, 1 client (latency, tps) and 8 clients (tps); TPC-B-like, 8
#   clients (tps); pgbench -S -C (a new connection per transaction);
#   COPY out and in of a table of about 110 MB, pg_dump of it, in MB/s;
#   pg_basebackup (tar, -X fetch) of the whole cluster (over 200 MB), MB/s;
#   CPU time of the client process and of the server (the postmaster and
#   every backend, from /proc) per MB (COPY out) and per transaction
#   (pgbench -S, 1 client);
# and ib_write_bw at 1 MiB on RXE_DEV, the device's ceiling, to say what
# fraction of it each bulk transfer reached. perf/db_report.py prints the
# table, writes OUT_JSON (default perf/results/db-<UTC time>.json) and a PNG
# chart of the ratios beside it. Raw output stays in OUT_JSON's name without
# .json. A measurement that fails is reported as missing and the run goes
# on. The last line printed is the JSON path.
# Environment: PG_RDMA_BENCH_HOST_LOAD (set by scripts/bench),
# PG_RDMA_DB_BENCH_SECONDS (per pgbench run, default 10).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
readonly HERE ROOT

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  sed -n '2,24s/^# \{0,1\}//p' "$0" >&2
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
readonly PGBENCH_SECONDS=${PG_RDMA_DB_BENCH_SECONDS:-10}
readonly PGBENCH_SCALE=5             # ~75 MB of pgbench tables
readonly COPY_ROWS=1100000           # ~110 MB of COPY text (~100 B a row)
readonly MANY_CLIENTS=8 THREADS=2    # the guest has 2 vCPUs
readonly IB_BW_SIZE=$((1 << 20)) IB_BW_BYTES=$((256 << 20))
readonly STEP_TIMEOUT_S=600          # any one client run
readonly PERFTEST_PORT=18515 LISTEN_WAIT_S=30
PG_CLUSTER_PORT=54500  # regress/pg reads it

say() { echo "bench: $*" >&2; }
FAILED=()
RESULTS=''  # key value lines, read by db_report.py

record() { echo "$1 $2" >>"$RESULTS"; }

# --- the server ------------------------------------------------------------------
# shellcheck source=regress/pg/cluster.sh
. "$ROOT/regress/pg/cluster.sh"

start_server() {
  # fsync off: the guest's disk is RAM, and both transports meet the same
  # server; the figures are about moving bytes, not about durability.
  pg_cluster_init "$(mktemp -d /tmp/pg_rdma-dbbench.XXXXXX)" "$BUILD" \
    "fsync = off" "shared_buffers = 256MB" "max_wal_size = 2GB" "log_connections = off" \
    "log_disconnections = off" || return 1
  pg_cluster_start || return 1
  pg_cluster_set_password postgres secret || return 1
  pg_cluster_psql -c 'create extension pg_rdma' >/dev/null
}

# CPU ticks the whole server used so far: the postmaster, what it reaped
# from exited backends (cutime, cstime) and every live child.
server_ticks() {
  local pm total=0 pid
  pm=$(head -n 1 "$PG_CLUSTER_DATA/postmaster.pid")
  total=$(awk '{ sub(/^.*\) /, ""); print $12 + $13 + $14 + $15 }' "/proc/$pm/stat")
  for pid in $(pgrep -P "$pm"); do
    total=$((total + $(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$pid/stat" 2>/dev/null || echo 0)))
  done
  echo "$total"
}

# Waits until only the server's own processes are left (the client's
# backends exited and were reaped), so their CPU time is in server_ticks.
wait_backends_gone() {
  local pm until=$((SECONDS + 20))
  pm=$(head -n 1 "$PG_CLUSTER_DATA/postmaster.pid")
  while [ "$(pgrep -P "$pm" | wc -l)" -gt "$BASE_CHILDREN" ] && [ $SECONDS -lt $until ]; do sleep 0.05; done
}

# --- running a client -------------------------------------------------------------
# client TRANSPORT CMD [ARG...]: runs a client program as the postgres user
# (regress/pg), through libpq_rdma.so with WITH_RSOCKET=require for rdma,
# plain for tcp. Its stdout goes to OUT (a file), its stderr to OUT.err.
# Sets CLIENT_CPU_S (user + system of the client process tree), SERVER_CPU_S
# (the server's, this run's backends included) and WALL_S.
client() {
  local transport=$1 out=$2; shift 2
  local pre=() t0 t1 s0 s1 cpu
  # require: a session that cannot use RDMA fails instead of falling back,
  # so every rdma figure is RDMA's.
  [ "$transport" = rdma ] && pre=(env LD_PRELOAD="$SO" WITH_RSOCKET=require)
  wait_backends_gone
  s0=$(server_ticks)
  t0=$(date +%s%N)
  # times: the subshell's children's user and system time, once they exit.
  cpu=$( (pg_cluster_client timeout "$STEP_TIMEOUT_S" "${pre[@]}" "$@" >"$out" 2>"$out.err"
          echo $? >"$out.rc"
          times) | awk 'NR == 2 { print }')
  t1=$(date +%s%N)
  wait_backends_gone
  s1=$(server_ticks)
  WALL_S=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
  CLIENT_CPU_S=$(echo "$cpu" | awk '{ n = 0; for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); n += p[1] * 60 + p[2] } printf "%.3f", n }')
  SERVER_CPU_S=$(awk -v a="$s0" -v b="$s1" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.3f", (b - a) / hz }')
  [ "$(cat "$out.rc")" = 0 ]
}

# --- measurements ----------------------------------------------------------------
pgbench_run() {  # NAME TRANSPORT PGBENCH_ARGS...
  local name=$1 transport=$2; shift 2
  local out=$RAW/$name-$transport.log
  say "$name over $transport"
  if ! client "$transport" "$out" pgbench -n -T "$PGBENCH_SECONDS" "$@"; then
    say "$name over $transport failed (see $out.err)"; FAILED+=("$name-$transport"); return 1
  fi
  local tps lat tx
  tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$out")
  lat=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' "$out")
  tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out")
  if [ -z "$tps" ] || [ -z "$tx" ]; then FAILED+=("$name-$transport"); return 1; fi
  record "$name.$transport.tps" "$tps"
  [ -n "$lat" ] && record "$name.$transport.latency_ms" "$lat"
  local setup
  setup=$(sed -n 's/^average connection time = \([0-9.]*\) ms/\1/p' "$out")
  [ -n "$setup" ] && record "$name.$transport.connection_ms" "$setup"
  record "$name.$transport.client_cpu_us_per_tx" "$(awk -v c="$CLIENT_CPU_S" -v n="$tx" 'BEGIN { printf "%.1f", c * 1e6 / n }')"
  record "$name.$transport.server_cpu_us_per_tx" "$(awk -v c="$SERVER_CPU_S" -v n="$tx" 'BEGIN { printf "%.1f", c * 1e6 / n }')"
}

# bulk NAME TRANSPORT BYTES CMD...: a timed bulk transfer of BYTES.
bulk() {
  local name=$1 transport=$2 bytes=$3; shift 3
  local out=$RAW/$name-$transport.log
  say "$name over $transport"
  if ! client "$transport" "$out" "$@"; then
    say "$name over $transport failed (see $out.err)"; FAILED+=("$name-$transport"); return 1
  fi
  local mb
  mb=$(awk -v b="$bytes" 'BEGIN { printf "%.3f", b / 1048576 }')
  record "$name.$transport.mb" "$mb"
  record "$name.$transport.seconds" "$WALL_S"
  record "$name.$transport.mb_per_s" "$(awk -v m="$mb" -v s="$WALL_S" 'BEGIN { printf "%.2f", m / s }')"
  record "$name.$transport.client_cpu_ms_per_mb" "$(awk -v c="$CLIENT_CPU_S" -v m="$mb" 'BEGIN { printf "%.2f", c * 1e3 / m }')"
  record "$name.$transport.server_cpu_ms_per_mb" "$(awk -v c="$SERVER_CPU_S" -v m="$mb" 'BEGIN { printf "%.2f", c * 1e3 / m }')"
}

# Both transports, TCP first; the order is the same for every figure.
both() {
  local fn=$1 name=$2; shift 2
  "$fn" "$name" tcp "$@"
  "$fn" "$name" rdma "$@"
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
  record cluster_mb "$(pg_cluster_psql -c "select round(sum(pg_database_size(oid)) / 1048576.0, 1) from pg_database")"
}

copy_out() {  # the COPY text goes to /dev/null on the client
  bulk "$1" "$2" "$COPY_BYTES" psql -X -v ON_ERROR_STOP=1 -c "\\copy copybench to '/dev/null'"
}
copy_in() {
  pg_cluster_psql -c 'truncate copybench_in' >/dev/null
  bulk "$1" "$2" "$COPY_BYTES" psql -X -v ON_ERROR_STOP=1 -c "\\copy copybench_in from '$COPY_FILE'"
}
dump() { bulk "$1" "$2" "$DUMP_BYTES" pg_dump -t copybench -f /dev/null; }
basebackup() {
  local dir=$PG_CLUSTER_WORK/backup-$2
  bulk "$1" "$2" 0 pg_basebackup -D "$dir" -Ft -X fetch -c fast --no-manifest || return 1
  # The size is known only afterwards: rewrite this run's figures with it.
  local bytes
  bytes=$(du -sb "$dir" | cut -f1)
  rm -rf "$dir"
  sed -i "/^$1\\.$2\\./d" "$RESULTS"
  local mb
  mb=$(awk -v b="$bytes" 'BEGIN { printf "%.3f", b / 1048576 }')
  record "$1.$2.mb" "$mb"
  record "$1.$2.seconds" "$WALL_S"
  record "$1.$2.mb_per_s" "$(awk -v m="$mb" -v s="$WALL_S" 'BEGIN { printf "%.2f", m / s }')"
  record "$1.$2.client_cpu_ms_per_mb" "$(awk -v c="$CLIENT_CPU_S" -v m="$mb" 'BEGIN { printf "%.2f", c * 1e3 / m }')"
  record "$1.$2.server_cpu_ms_per_mb" "$(awk -v c="$SERVER_CPU_S" -v m="$mb" 'BEGIN { printf "%.2f", c * 1e3 / m }')"
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
    echo "cpus=$(nproc)"
    echo "started=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "postgres=$("$PG_CLUSTER_BIN/postgres" --version)"
    echo "pgbench_seconds=$PGBENCH_SECONDS"
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
  BASE_CHILDREN=$(pgrep -P "$(head -n 1 "$PG_CLUSTER_DATA/postmaster.pid")" | wc -l)
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

main
