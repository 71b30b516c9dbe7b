#!/usr/bin/env bash
# perf/db-server.sh — the server side of the db bench (perf/run-db-bench.sh):
# the PostgreSQL 15 cluster with the built pg_rdma (regress/pg) and the
# readings of its backends' CPU and of its host's.
#
# Sourced by run-db-bench.sh, which calls the db_* functions itself when
# server and clients share a host (the guest). In the two-host mode
# (scripts/bench db --peer) run-db-bench.sh runs this file on the peer over
# ssh, one function a call:
#   perf/db-server.sh start BUILD ADDR PORT CLIENT_ADDR
#       a cluster serving pg_rdma and TCP on ADDR:PORT to CLIENT_ADDR;
#       prints "WORK PASSWORD": the cluster's directory, for the calls
#       below, and the password of its superuser postgres (made here, so
#       that it is on no command line)
#   perf/db-server.sh WORK FUNCTION [ARG...]
#       one of the db_* functions below on the cluster in WORK;
#       db_stop stops it and removes WORK.
set -uo pipefail

DB_SERVER_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly DB_SERVER_HERE
# db_lib: regress/pg's library, loaded by what needs it. A step's reading
# after it (db_after) does without: on the peer everything a call does
# before its reading counts in the host's CPU of that step, and loading
# the library runs pg_config, a perl script, three times.
db_lib() {
  [ -z "${PG_BINDIR:-}" ] || return 0
  # shellcheck source=regress/pg/cluster.sh
  . "$DB_SERVER_HERE/../regress/pg/cluster.sh"
}

# The clients' backends of a step exit after the client; their CPU is
# counted once the postmaster has reaped them.
readonly BACKENDS_GONE_WAIT_S=20
# One replication slot for each WAL streaming run (run-db-bench.sh: two a
# round, at most nine rounds) and pg_basebackup's temporary one.
readonly DB_MAX_SLOTS=20

db_say() { echo "db-server: $*" >&2; }

# db_start BUILD [CLIENT_ADDR]: the cluster on RXE_IP:PG_CLUSTER_PORT
# (regress/pg reads both), with CLIENT_ADDR let in when it is not in the
# guests' range conf/pg_hba.pg_rdma.conf already admits. Sets
# DB_PASSWORD.
db_start() {
  local build=$1 client=${2:-}
  db_lib
  # fsync off: the guest's disk is RAM, and both transports meet the same
  # server; the figures are about moving bytes, not about durability.
  # autovacuum off: a vacuum set off by one step's writes must not land in
  # the next step's timing (VACUUM runs once, outside any timing).
  pg_cluster_init "$(mktemp -d /tmp/pg_rdma-dbbench.XXXXXX)" "$build" \
    "fsync = off" "shared_buffers = 256MB" "max_wal_size = 2GB" "autovacuum = off" \
    "log_connections = off" "log_disconnections = off" \
    "max_replication_slots = $DB_MAX_SLOTS" || return 1
  case $client in
    '' | 10.99.0.*) ;;
    *) printf 'host %s all %s/32 scram-sha-256\n' all "$client" replication "$client" | pg_cluster_hba_add ;;
  esac
  pg_cluster_start || return 1
  DB_PASSWORD=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  pg_cluster_set_password postgres "$DB_PASSWORD" || return 1
  pg_cluster_psql -c 'create extension pg_rdma' >/dev/null
}

db_postmaster() { head -n 1 "$PG_CLUSTER_DATA/postmaster.pid"; }
db_children() { pgrep -P "$(db_postmaster)" | wc -l; }

# db_counters: one line, the counters a step's CPU figures are the
# difference of, each read here:
#   the postmaster's cutime + cstime, then cutime alone: every backend (and
#     walsender) it reaped, in all and in user space; the long-lived
#     processes (checkpointer, walwriter...) are left out;
#   the host's busy ticks (all of /proc/stat's but idle and iowait), then
#     its user-space share (user, nice): the kernel's share too, where rxe
#     does its copies and CRCs (softirq, kworkers), which no process is
#     charged for;
#   the host's context switches, then those of its softirq threads and the
#     ticks those threads ran: rxe in Debian 12's kernel (6.1) hands every
#     completion event to a tasklet, which raised from a process (the
#     sender's post, which rxe runs inline over loopback) means waking
#     ksoftirqd, which preempts the sender (perf/FINDINGS.md);
#   the tick rate.
db_counters() {
  local pm
  pm=$(db_postmaster)
  awk '{ sub(/^.*\) /, ""); printf "%d %d ", $14 + $15, $14 }' "/proc/$pm/stat"
  db_host_counters
}

# db_host_counters: the host's part of db_counters (run-db-bench.sh reads
# the clients' host with it too).
db_host_counters() {
  local pid status=() stat=()
  for pid in $(pgrep '^ksoftirqd/'); do status+=("/proc/$pid/status") stat+=("/proc/$pid/stat"); done
  awk '$1 == "cpu" { printf "%d %d ", $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 }
       $1 == "ctxt" { printf "%d ", $2 }' /proc/stat
  awk '/ctxt_switches:/ { s += $2 } END { printf "%d ", s }' "${status[@]}" /dev/null
  awk '{ sub(/^.*\) /, ""); s += $12 + $13 } END { printf "%d ", s }' "${stat[@]}" /dev/null
  getconf CLK_TCK
}

# db_wait_backends_gone BASE: waits until only the server's own BASE
# processes are left (the client's backends exited and were reaped, so
# their CPU is in db_counters).
db_wait_backends_gone() {
  local until=$((SECONDS + BACKENDS_GONE_WAIT_S))
  while [ "$(db_children)" -gt "$1" ]; do
    [ $SECONDS -lt $until ] ||
      { db_say "backends still there after ${BACKENDS_GONE_WAIT_S} s: CPU figures may be short"; return 1; }
    sleep 0.05
  done
}

# db_before BASE: a step's start, as one call: the last step's backends
# gone, its dirty buffers written now rather than inside this step, then
# db_counters.
db_before() {
  db_lib
  db_wait_backends_gone "$1"
  pg_cluster_psql -c checkpoint >/dev/null
  db_wait_backends_gone "$1"
  db_counters
}

# db_after BASE: a step's end: its backends reaped, then db_counters.
# Over ssh, the host's busy and user ticks less what this call's own
# session has used so far (session_ticks), which the step did not: its
# shell, which reads the login user's .bashrc (seconds of pyenv under TCG
# here), and this script. ssh's daemon's share stays in.
db_after() {
  db_wait_backends_gone "$1"
  local c session
  read -r -a c <<<"$(db_counters)"
  if [ "${DB_SERVER_OVER_SSH:-0}" = 1 ]; then
    read -r -a session <<<"$(session_ticks)"
    c[2]=$((c[2] - session[0])) c[3]=$((c[3] - session[1]))
  fi
  echo "${c[*]}"
}

# session_ticks: the CPU ticks (all, then user) of this process and its
# ancestors up to the ssh daemon, each with the children it reaped; "0 0"
# when no ssh daemon is among them (then they are not a session's).
session_ticks() {
  local pid=$$ all=0 user=0 f
  while [ "$pid" -gt 1 ] && read -r -a f <<<"$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null)"; do
    case $(cat "/proc/$pid/comm") in
      dropbear | sshd | sshd-session) echo "$all $user"; return ;;
    esac
    # after the name: state ppid ... utime (12th) stime cutime cstime
    all=$((all + f[11] + f[12] + f[13] + f[14])) user=$((user + f[11] + f[13]))
    pid=${f[1]}
  done
  echo "0 0"
}

# db_make_data SCALE ROWS: pgbench's tables at SCALE and the COPY table of
# ROWS rows (about 100 B of COPY text each), made on the server's host.
db_make_data() {
  db_lib
  pg_cluster_client pgbench -i -q -s "$1" >"$PG_CLUSTER_WORK/pgbench-init.log" 2>&1 ||
    { cat "$PG_CLUSTER_WORK/pgbench-init.log" >&2; return 1; }
  pg_cluster_psql >/dev/null <<SQL
create table copybench as
  select g as id, repeat(md5(g::text), 3) as payload from generate_series(1, $2) g;
create table copybench_in (like copybench);
vacuum analyze;
SQL
}

# db_make_wal SLOTS: SLOTS physical replication slots (walbench_1 ...),
# each holding the WAL from a fresh segment on, then the WAL of a copy of
# the COPY table written. Prints the end of that WAL (its flush position):
# each run streams from its slot up to there.
db_make_wal() {
  db_lib
  local i end
  # A slot holds WAL from the last checkpoint's redo point: after a switch
  # and a checkpoint, the start of a segment that holds nothing but what
  # follows (not the rest of the last base backup's, switch padding).
  pg_cluster_psql -c 'select pg_switch_wal()' -c checkpoint >/dev/null || return 1
  for ((i = 1; i <= $1; i++)); do
    pg_cluster_psql -c "select pg_create_physical_replication_slot('walbench_$i', true)" >/dev/null || return 1
  done
  pg_cluster_psql -c 'set client_min_messages = warning' -c 'drop table if exists walbench' \
    -c 'create table walbench as select * from copybench' >/dev/null || return 1
  end=$(pg_cluster_psql -At -c 'select pg_current_wal_flush_lsn()') || return 1
  # pg_receivewal stops once it has received WAL past its end position,
  # not at it: one more record (a checkpoint's) is written past the end.
  pg_cluster_psql -c checkpoint >/dev/null || return 1
  echo "$end"
}

# db_wal_bytes SLOT END: the bytes pg_receivewal streams from SLOT up to
# END. It starts at the beginning of the segment the slot's restart_lsn
# is in, so the bytes are from there.
db_wal_bytes() {
  db_lib
  pg_cluster_psql -At -c "select pg_wal_lsn_diff('$2', restart_lsn) + (pg_walfile_name_offset(restart_lsn)).file_offset
                          from pg_replication_slots where slot_name = '$1'"
}

# db_drop_wal: the slots and the table db_make_wal made, and the WAL the
# slots hold.
db_drop_wal() {
  db_lib
  pg_cluster_psql -c "select pg_drop_replication_slot(slot_name) from pg_replication_slots
                      where slot_name like 'walbench\\_%'" -c 'drop table if exists walbench' >/dev/null
}

db_psql() { db_lib && pg_cluster_psql "$@"; }
db_version() { "$PG_CLUSTER_BIN/postgres" --version; }
# db_stop: stops the cluster and removes its directory.
db_stop() {
  db_lib
  pg_cluster_adopt "$PG_CLUSTER_WORK" && pg_cluster_cleanup
}

# db_server_main ARG...: the command line (the top of this file).
db_server_main() {
  # ssh starts in the login user's home, which the postgres user that
  # runs the cluster's programs may not enter.
  cd / || return 1
  DB_SERVER_OVER_SSH=1
  if [ "${1:-}" = start ] && [ $# = 5 ]; then
    export RXE_IP=$3
    PG_CLUSTER_PORT=$4
    db_start "$2" "$5" || return 1
    # The cluster outlives this call: regress/pg's EXIT trap must not stop it.
    pg_cluster_disown
    echo "$PG_CLUSTER_WORK $DB_PASSWORD"
    return 0
  fi
  if [ $# -lt 2 ] || [ ! -f "$1/cluster.env" ] || [[ $2 != db_* ]]; then
    sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0" >&2
    return 2
  fi
  # Only the cluster's variables: the whole library is loaded by the
  # steps that need it (db_lib).
  # shellcheck source=regress/pg/cluster_env.sh
  . "$DB_SERVER_HERE/../regress/pg/cluster_env.sh"
  pg_cluster_use "$1" || return 1
  local fn=$2
  shift 2
  "$fn" "$@"
}

# Sourced: the functions, and the library for the cluster it starts.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  db_server_main "$@"
  exit
fi
db_lib
