#!/usr/bin/env bash
# perf/run-db-bench.sh BUILD_DIR [OUT_JSON]
#
# Runs INSIDE the Soft-RoCE guest (scripts/bench db starts it through
# regress/rxe-guest, which exports RXE_DEV and RXE_IP and sets ulimit -l
# unlimited), or on a host with an RDMA NIC whose server runs on a second
# host (scripts/bench db --peer; PG_RDMA_BENCH_PEER, below). Starts
# PostgreSQL 15 with the built pg_rdma (regress/pg, by perf/db-server.sh)
# and measures, over RDMA (libpq_rdma.so, with_rsocket=require) and over TCP
# (plain libpq) to the same server and address, each figure in rounds of
# one run per transport (TCP, RDMA; RDMA, TCP; TCP, RDMA), after a CHECKPOINT:
#   pgbench -S, 1 client (latency, tps) and 8 clients (tps); TPC-B-like, 8
#   clients (tps); pgbench -S -C (a new connection per transaction);
#   COPY out and in of a table of about 110 MB, pg_dump of it, in MB/s;
#   pg_basebackup (tar, default -X stream) of the whole cluster, MB/s;
#   WAL streaming (pg_receivewal from a replication slot) of the WAL of a
#   copy of that table (about 170 MB), MB/s;
#   CPU time of the client process tree, of the server's backends (what the
#   postmaster reaped) and of the whole guest (kernel and rxe included;
#   with a peer, of each host), per MB and per transaction; before each
#   COPY out, the client CPU of the same command copying no rows (the
#   session's own cost);
# and ib_write_bw at 1 MiB on RXE_DEV, the device's ceiling, to say what
# fraction of it each bulk transfer reached. perf/db_report.py prints the
# table, writes OUT_JSON (default perf/results/db-<UTC time>.json) and a PNG
# chart of the ratios beside it. Raw output stays in OUT_JSON's name without
# .json. A measurement that fails is reported as missing and the run goes
# on. The last line printed is the JSON path.
# Environment: PG_RDMA_BENCH_HOST_LOAD (set by scripts/bench),
# PG_RDMA_DB_BENCH_SECONDS (per pgbench run, default 10),
# PG_RDMA_DB_BENCH_ROUNDS (rounds per figure, 2 to 9, default 3),
# PG_RDMA_DB_BENCH_SCALE (pgbench's scale, default 8) and
# PG_RDMA_DB_BENCH_COPY_ROWS (the COPY table's rows, default 1100000):
# smaller data for a check of the path, not for figures,
# PG_RDMA_BENCH_COUNTED (1: scripts/bench db --counted, a guest whose clock
# counts instructions: pgbench's figures repeat, so 2 rounds of 3
# counted seconds by default; each counted second takes about 8 on the
# host).
# Two hosts: PG_RDMA_BENCH_PEER, PG_RDMA_BENCH_PEER_ADDR,
# PG_RDMA_BENCH_PEER_DEVICE and RXE_DEV, as perf/peer.sh says: the cluster
# runs on the peer (perf/db-server.sh at this script's path there, BUILD_DIR
# at the same path), every client here.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0" >&2
  exit 2
fi
BUILD=$(cd "$1" && pwd) || exit 2
OUT_JSON=${2:-$HERE/results/db-$(date -u +%Y%m%dT%H%M%SZ).json}
RAW=${OUT_JSON%.json}
SO=$BUILD/libclient/preload/libpq_rdma.so
readonly BUILD OUT_JSON RAW SO
# shellcheck source=perf/peer.sh
. "$HERE/peer.sh"
peer_setup

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
# ~120 MB of pgbench tables; 8 branches for 8 clients
readonly PGBENCH_SCALE=${PG_RDMA_DB_BENCH_SCALE:-8}
readonly COPY_ROWS=${PG_RDMA_DB_BENCH_COPY_ROWS:-1100000}  # ~110 MB of COPY text (~100 B a row)
# The guest has 2 vCPUs; a real client host (two-host mode) gets one
# pgbench thread per CPU up to one per client, so that 8 clients measure
# the transport, not two threads.
readonly MANY_CLIENTS=8
THREADS=2
[ -n "${PG_RDMA_BENCH_PEER:-}" ] && THREADS=$(( $(nproc) < MANY_CLIENTS ? $(nproc) : MANY_CLIENTS ))
readonly THREADS
readonly IB_BW_SIZE=$((1 << 20)) IB_BW_BYTES=$((256 << 20))
readonly STEP_TIMEOUT_S=120          # any one client run (a pgbench run takes PGBENCH_SECONDS)
readonly PERFTEST_PORT=18515
# for ib_write_bw's server to listen; on a peer its word comes over ssh
LISTEN_WAIT_S=30
[ -n "$PEER" ] && LISTEN_WAIT_S=90
readonly LISTEN_WAIT_S
PG_CLUSTER_PORT=54500  # regress/pg reads it
# Bounds of the steps on the peer (over ssh): starting the cluster (initdb
# takes 15-60 s in a TCG guest), making the data (pgbench -i and the COPY
# table, minutes there), a step's readings before and after it (a
# CHECKPOINT and the wait for its backends), and stopping it.
readonly PEER_START_S=600 PEER_DATA_S=2400 PEER_READING_S=300 PEER_STOP_S=150

say() { echo "bench: $*" >&2; }
FAILED=()
RESULTS=''  # "key value" lines, read by db_report.py

# record KEY VALUE; an empty VALUE (not measured) is left out.
record() { [ -z "$2" ] || echo "$1 $2" >>"$RESULTS"; }
# ratio A B [SCALE] [DIGITS]: A * SCALE / B, or nothing when B is 0.
ratio() { awk -v a="$1" -v b="$2" -v k="${3:-1}" -v d="${4:-2}" 'BEGIN { if (b > 0) printf "%.*f", d, a * k / b }'; }
# ticks_s BEFORE AFTER HZ: the seconds between two readings of a tick counter.
ticks_s() { awk -v a="$1" -v b="$2" -v hz="$3" 'BEGIN { printf "%.3f", (b - a) / hz }'; }

# --- the server ------------------------------------------------------------------
# perf/db-server.sh has the cluster and the readings of CPU; here or on the
# peer (srv).
# shellcheck source=perf/db-server.sh
. "$HERE/db-server.sh"

SERVER_WORK=''  # the cluster's directory on the peer
# srv SECONDS FUNCTION [ARG...]: one of db-server.sh's functions on the
# server's host: here, or on the peer bounded by SECONDS.
srv() {
  local limit=$1
  shift
  if [ -z "$PEER" ]; then "$@"; else on_peer_within "$limit" "$HERE/db-server.sh" "$SERVER_WORK" "$@"; fi
}

# CLIENT_WORK: the COPY file and base backups, on the clients' host.
CLIENT_WORK='' PGPASS_FILE=''
start_server() {
  if [ -z "$PEER" ]; then
    db_start "$BUILD" || return 1
    CLIENT_WORK=$PG_CLUSTER_WORK
    return 0
  fi
  # The peer lets in the address this host's packets to it leave from.
  local client_addr started
  client_addr=$(ip -o route get "$SERVER_IP" 2>/dev/null | sed -n 's/.* src \([^ ]*\).*/\1/p')
  started=$(on_peer_within "$PEER_START_S" "$HERE/db-server.sh" start "$BUILD" "$SERVER_IP" "$PG_CLUSTER_PORT" \
    "${client_addr:-unknown}") ||
    { say "the cluster did not start on $PEER (above: PostgreSQL 15 there, $BUILD built there, port $PG_CLUSTER_PORT free on $SERVER_IP?)"; return 1; }
  SERVER_WORK=${started% *}
  CLIENT_WORK=$(mktemp -d /tmp/pg_rdma-dbbench-client.XXXXXX) || return 1
  PGPASS_FILE=$CLIENT_WORK/pgpass
  (umask 077 && echo "*:*:*:postgres:${started##* }" >"$PGPASS_FILE")
}

stop_server() {
  if [ -z "$PEER" ]; then pg_cluster_cleanup; return; fi
  [ -z "$SERVER_WORK" ] || srv "$PEER_STOP_S" db_stop ||
    say "could not stop the cluster on $PEER: stop it there (sudo -u postgres $SERVER_WORK/stage/usr/lib/postgresql/15/bin/pg_ctl -D $SERVER_WORK/data -m immediate stop) and remove $SERVER_WORK"
  [ -z "$CLIENT_WORK" ] || rm -rf "$CLIENT_WORK"
}

# run_client CMD...: a client program aimed at the server over TCP (PGHOST
# etc.): in the guest as regress/pg runs it, with a peer as this user.
run_client() {
  if [ -z "$PEER" ]; then pg_cluster_client "$@"; return; fi
  env PGHOST="$SERVER_IP" PGPORT="$PG_CLUSTER_PORT" PGDATABASE=postgres PGUSER=postgres \
    PGPASSFILE="$PGPASS_FILE" PGCONNECT_TIMEOUT=60 "$@"
}

# The hosts whose whole CPU is read (their /proc/stat): the guest, where
# both ends are; with a peer, each host apart (no one figure stands for
# the guest's), this one's from here and the peer's over ssh.
if [ -n "$PEER" ]; then HOSTS=(client_host server_host); else HOSTS=(guest); fi
readonly HOSTS
# host_key HOST FIGURE: the results' key of a host's FIGURE; the guest's
# keep the names they had before there were hosts (softirqd_* bare).
host_key() {
  case $1/$2 in
    guest/softirqd_*) echo "$2" ;;
    *) echo "$1_$2" ;;
  esac
}

# --- running a client -------------------------------------------------------------
# client TRANSPORT OUT CMD [ARG...]: runs a client program (run_client),
# through libpq_rdma.so with WITH_RSOCKET=require for rdma, plain for tcp.
# Its stdout goes to OUT, its stderr to OUT.err. Sets WALL_S, CLIENT_CPU_S
# (user + system of the client's process tree), SERVER_CPU_S (the backends
# it used), and CLIENT_USER_S and SERVER_USER_S (their user-space parts);
# and for each of HOSTS, in arrays by host: HOST_CPU_S (everything, kernel
# included), HOST_USER_S, HOST_SWITCHES (context switches),
# SOFTIRQD_SWITCHES and SOFTIRQD_CPU_S (the softirq threads').
declare -A HOST_CPU_S HOST_USER_S HOST_SWITCHES SOFTIRQD_SWITCHES SOFTIRQD_CPU_S
client() {
  local transport=$1 out=$2; shift 2
  local pre=() t0 t1 before after cpu
  # require: a session that cannot use RDMA fails instead of falling back.
  [ "$transport" = rdma ] && pre=(env LD_PRELOAD="$SO" WITH_RSOCKET=require)
  # The server's readings first, this host's right before the start: a
  # reading over ssh takes a while.
  before=$(srv "$PEER_READING_S" db_before "$BASE_CHILDREN") || say "$out: no reading of the server before it"
  [ -z "$PEER" ] || before="$before $(db_host_counters)"
  t0=$(date +%s%N)
  # times: the subshell's children's user and system time, once they exit.
  cpu=$( (run_client timeout "$STEP_TIMEOUT_S" "${pre[@]}" "$@" >"$out" 2>"$out.err"
          echo $? >"$out.rc"
          times) | awk 'NR == 2 { print }')
  t1=$(date +%s%N)
  [ -z "$PEER" ] || after=$(db_host_counters)
  after="$(srv "$PEER_READING_S" db_after "$BASE_CHILDREN") ${after:-}" || say "$out: no reading of the server after it"
  WALL_S=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
  CLIENT_CPU_S=$(echo "$cpu" | awk '{ n = 0; for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); n += p[1] * 60 + p[2] } printf "%.3f", n }')
  CLIENT_USER_S=$(echo "$cpu" | awk '{ split($1, p, /[ms]/); printf "%.3f", p[1] * 60 + p[2] }')
  readings "$before" "$after"
  [ "$(cat "$out.rc")" = 0 ] || return 1
  # A library the loader could not preload leaves plain libpq, which
  # ignores WITH_RSOCKET: that run would be TCP under the rdma name.
  ! grep -q 'cannot be preloaded' "$out.err"
}

# readings BEFORE AFTER: the figures of client() from two readings, each
# db_counters' fields (the server's host), then with a peer
# db_host_counters' (this host). A missing reading leaves its figures
# empty, which ratio() records as nothing: a reading across hosts that
# failed is said missing, not taken as zero.
readings() {
  local b a h i=2 offset
  read -r -a b <<<"$1"
  read -r -a a <<<"$2"
  SERVER_CPU_S='' SERVER_USER_S=''
  for h in "${HOSTS[@]}"; do HOST_CPU_S[$h]='' HOST_USER_S[$h]='' HOST_SWITCHES[$h]='' SOFTIRQD_SWITCHES[$h]='' SOFTIRQD_CPU_S[$h]=''; done
  # db_counters: 2 of the server's, 5 of its host's, the tick rate; then
  # db_host_counters' 5 and tick rate.
  [ ${#b[@]} = ${#a[@]} ] && [ ${#b[@]} -ge 8 ] || return 0
  SERVER_CPU_S=$(ticks_s "${b[0]}" "${a[0]}" "${b[7]}")
  SERVER_USER_S=$(ticks_s "${b[1]}" "${a[1]}" "${b[7]}")
  local hosts=(guest)
  [ -z "$PEER" ] || hosts=(server_host client_host)
  for h in "${hosts[@]}"; do
    [ ${#b[@]} -ge $((i + 6)) ] || break
    offset=$i
    HOST_CPU_S[$h]=$(ticks_s "${b[offset]}" "${a[offset]}" "${b[offset + 5]}")
    HOST_USER_S[$h]=$(ticks_s "${b[offset + 1]}" "${a[offset + 1]}" "${b[offset + 5]}")
    HOST_SWITCHES[$h]=$((a[offset + 2] - b[offset + 2]))
    SOFTIRQD_SWITCHES[$h]=$((a[offset + 3] - b[offset + 3]))
    SOFTIRQD_CPU_S[$h]=$(ticks_s "${b[offset + 4]}" "${a[offset + 4]}" "${b[offset + 5]}")
    i=$((i + 6))
  done
}

# The rdma figures must be RDMA's: one session through the same path says
# what pg_stat_rdma sees for it before any of them is measured.
check_rdma_path() {
  local seen
  seen=$(run_client env LD_PRELOAD="$SO" WITH_RSOCKET=require psql -X -At \
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
  record "$key.client_user_us_per_tx" "$(ratio "$CLIENT_USER_S" "$tx" 1e6 1)"
  record "$key.server_user_us_per_tx" "$(ratio "$SERVER_USER_S" "$tx" 1e6 1)"
  local h
  for h in "${HOSTS[@]}"; do
    record "$key.$(host_key "$h" cpu_us_per_tx)" "$(ratio "${HOST_CPU_S[$h]}" "$tx" 1e6 1)"
    record "$key.$(host_key "$h" switches_per_tx)" "$(ratio "${HOST_SWITCHES[$h]}" "$tx" 1 3)"
    record "$key.$(host_key "$h" softirqd_switches_per_tx)" "$(ratio "${SOFTIRQD_SWITCHES[$h]}" "$tx" 1 3)"
    record "$key.$(host_key "$h" softirqd_cpu_us_per_tx)" "$(ratio "${SOFTIRQD_CPU_S[$h]}" "$tx" 1e6 1)"
    record "$key.$(host_key "$h" user_us_per_tx)" "$(ratio "${HOST_USER_S[$h]}" "$tx" 1e6 1)"
  done
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
  local h
  for h in "${HOSTS[@]}"; do
    record "$key.$(host_key "$h" cpu_ms_per_mb)" "$(ratio "${HOST_CPU_S[$h]}" "$mb" 1e3)"
  done
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
  srv "$PEER_DATA_S" db_make_data "$PGBENCH_SCALE" "$COPY_ROWS" || return 1
  # COPY in reads it on the clients' host.
  COPY_FILE=$CLIENT_WORK/copybench.data
  run_client psql -X -v ON_ERROR_STOP=1 -c "\\copy copybench to '$COPY_FILE'" >/dev/null || return 1
  COPY_BYTES=$(stat -c %s "$COPY_FILE")
  DUMP_BYTES=$(run_client pg_dump -t copybench | wc -c)
}

copy_out() {  # the COPY text goes to /dev/null on the client
  session_cpu "$1" "$2" "$3" psql -X -v ON_ERROR_STOP=1 -c "\\copy (select * from copybench limit 0) to '/dev/null'"
  bulk "$1" "$2" "$3" "$COPY_BYTES" psql -X -v ON_ERROR_STOP=1 -c "\\copy copybench to '/dev/null'"
}
copy_in() {
  srv "$PEER_READING_S" db_psql -c 'truncate copybench_in' >/dev/null
  bulk "$1" "$2" "$3" "$COPY_BYTES" psql -X -v ON_ERROR_STOP=1 -c "\\copy copybench_in from '$COPY_FILE'"
}
dump() { bulk "$1" "$2" "$3" "$DUMP_BYTES" pg_dump -t copybench -f /dev/null; }
basebackup() {  # tar format, pg_basebackup's default -X stream
  BULK_DIR=$CLIENT_WORK/backup
  rm -rf "$BULK_DIR"
  bulk "$1" "$2" "$3" - pg_basebackup -D "$BULK_DIR" -Ft -c fast
}

# WAL streaming, as a standby's walreceiver takes it: pg_receivewal asks a
# walsender for WAL with the same replication protocol. Each run streams
# the WAL of one copy of the COPY table (db_make_wal, made once for all
# runs) from a slot of its own, made before that WAL was written, to the
# WAL's end, and writes it to files without fsync (as the server runs:
# the figure is about moving the bytes).
WAL_END='' WAL_SLOTS_USED=0
make_wal() {
  say "WAL for the streaming runs: a copy of the COPY table, held by $((2 * ROUNDS)) replication slots"
  WAL_END=$(srv "$PEER_DATA_S" db_make_wal $((2 * ROUNDS))) && [ -n "$WAL_END" ] ||
    { say "could not write the WAL to stream"; WAL_END=''; FAILED+=(wal_stream); return 1; }
}
wal_stream() {
  [ -n "$WAL_END" ] || return 1
  WAL_SLOTS_USED=$((WAL_SLOTS_USED + 1))
  local slot=walbench_$WAL_SLOTS_USED bytes
  bytes=$(srv "$PEER_READING_S" db_wal_bytes "$slot" "$WAL_END") && [ -n "$bytes" ] ||
    { say "no WAL held by $slot"; FAILED+=("$1-$2-r$3"); return 1; }
  BULK_DIR=$CLIENT_WORK/wal
  rm -rf "$BULK_DIR"
  run_client mkdir "$BULK_DIR" || { FAILED+=("$1-$2-r$3"); return 1; }
  bulk "$1" "$2" "$3" "$bytes" pg_receivewal -D "$BULK_DIR" -S "$slot" -E "$WAL_END" --no-loop --no-sync -v
  rm -rf "$BULK_DIR"
}

# at_server SECONDS CMD...: CMD on the server's host (here or the peer),
# bounded by SECONDS.
at_server() {
  local limit=$1
  shift
  if [ -z "$PEER" ]; then timeout "$limit" "$@"; else on_peer_within "$limit" "$@"; fi
}

# ib_write_bw at 1 MiB: the device's ceiling for bulk transfers, this run;
# its server where the cluster is.
readonly IB_BW_TIMEOUT_S=120
ib_write_bw_ceiling() {
  local args=(-p "$PERFTEST_PORT" -F -s "$IB_BW_SIZE" -n $((IB_BW_BYTES / IB_BW_SIZE)))
  say "ib_write_bw ${IB_BW_SIZE} B"
  at_server "$IB_BW_TIMEOUT_S" ib_write_bw -d "$PEER_DEV" "${args[@]}" >"$RAW/ib_write_bw.server.log" 2>&1 &
  local spid=$! until=$((SECONDS + LISTEN_WAIT_S))
  until at_server 30 ss -Hltn "sport = :$PERFTEST_PORT" 2>/dev/null | grep -q .; do
    [ $SECONDS -lt $until ] || { kill $spid; FAILED+=(ib_write_bw); return 1; }
    sleep 0.1
  done
  timeout "$IB_BW_TIMEOUT_S" ib_write_bw -d "$RXE_DEV" "${args[@]}" "$SERVER_IP" >"$RAW/ib_write_bw.client.log" 2>&1
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
    echo "address=$SERVER_IP"
    echo "kernel=$(uname -r)"
    [ -z "$PEER" ] || peer_env_lines
    echo "guest=${PG_RDMA_GUEST:-unknown}"
    echo "clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
    echo "cpus=$(nproc)"
    echo "started=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "postgres=$(srv "$PEER_READING_S" db_version)"
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
  # The cluster is stopped however the run ends (regress/pg's traps turn
  # HUP, INT and TERM into an exit).
  trap stop_server EXIT
  local start=$SECONDS
  start_server || { say "the server did not start"; exit 1; }
  write_env
  make_data || { say "could not make the data"; exit 1; }
  check_rdma_path || exit 1
  BASE_CHILDREN=$(srv "$PEER_READING_S" db_children) || { say "cannot count the server's processes"; exit 1; }
  ib_write_bw_ceiling
  both pgbench_run select_1 -S -c 1
  both pgbench_run select_8 -S -c "$MANY_CLIENTS" -j "$THREADS"
  both pgbench_run tpcb_8 -c "$MANY_CLIENTS" -j "$THREADS"
  both pgbench_run connect_1 -S -C -c 1
  both copy_out copy_out
  both copy_in copy_in
  both dump pg_dump
  both basebackup pg_basebackup
  make_wal && both wal_stream wal_stream
  srv "$PEER_READING_S" db_drop_wal || say "could not drop the WAL streaming runs' slots and table"
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
