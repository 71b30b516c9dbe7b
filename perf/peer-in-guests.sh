#!/usr/bin/env bash
# perf/peer-in-guests.sh [transport|db] [scripts/bench options...]
#
# Runs `scripts/bench transport --peer` (the default) or `scripts/bench db
# --peer` as their runbook says (perf/README.md, "Two hosts"), between two
# Soft-RoCE guests joined by a virtual NIC (regress/rxe-guest -p) instead
# of two hosts with NICs: host A (10.99.0.1) runs the clients, host B
# (10.99.0.2) an ssh server (dropbear, key login) and the servers (for db,
# the PostgreSQL cluster). It checks the two-host path: the figures are
# TCG's. PG_RDMA_BUILD, PG_RDMA_BENCH_ROUNDS (transport; default here 1)
# and db's knobs (perf/run-db-bench.sh: PG_RDMA_DB_BENCH_ROUNDS, default
# here 2, _SECONDS, _SCALE, _COPY_ROWS) pass through; the instruction
# count (callgrind) is left out. Needs dropbear-bin.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly ROOT

if [ "${1:-}" = --inside-a ]; then
  kind=$2
  shift 2
  ssh-keygen -q -t ed25519 -N '' -f "$RXE_PAIR_DIR/id" || exit 1
  mkdir -p ~/.ssh && chmod 700 ~/.ssh
  printf 'Host %s\n  IdentityFile %s\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n' \
    "$RXE_PEER_IP" "$RXE_PAIR_DIR/id" >~/.ssh/config
  until [ -e "$RXE_PAIR_DIR/ssh-ready" ]; do sleep 0.2; done
  "$ROOT/scripts/bench" "$kind" --peer "root@$RXE_PEER_IP" "$@"
  rc=$?
  : >"$RXE_PAIR_DIR/done"
  exit $rc
fi
if [ "${1:-}" = --inside-b ]; then
  until [ -e "$RXE_PAIR_DIR/id.pub" ]; do sleep 0.2; done
  mkdir -p /root/.ssh /tmp/dropbear && chmod 700 /root/.ssh
  cp "$RXE_PAIR_DIR/id.pub" /root/.ssh/authorized_keys && chmod 600 /root/.ssh/authorized_keys
  # bash reads ~/.bashrc for every command ssh runs, and this host's root's
  # (which the guest sees) sets up pyenv: seconds of TCG's CPU a call, on
  # B's CPU figures and clock. B gets a plain Debian root's, in its
  # throw-away layer.
  : >/root/.bashrc
  dropbearkey -t ed25519 -f /tmp/dropbear/host_key >/dev/null 2>&1 || exit 1
  # -s: keys only; -F: in the foreground (this script owns it).
  dropbear -s -F -E -r /tmp/dropbear/host_key -p "$RXE_IP:22" 2>/tmp/dropbear/log &
  until ss -Hltn 'sport = :22' | grep -q .; do sleep 0.2; done
  : >"$RXE_PAIR_DIR/ssh-ready"
  until [ -e "$RXE_PAIR_DIR/done" ]; do sleep 1; done
  exit 0
fi
command -v dropbear >/dev/null || { echo "peer-in-guests: needs dropbear-bin (apt-get install dropbear-bin)" >&2; exit 1; }
kind=transport
case ${1:-} in transport | db) kind=$1; shift ;; esac
# Each guest's limit: the transport's one round takes 20-40 minutes of two
# TCG guests on a busy host; db's two rounds longer, with its data made
# in the guest first.
readonly TRANSPORT_PAIR_TIMEOUT_S=3600 DB_PAIR_TIMEOUT_S=5400
# db: B holds the cluster (~230 MB at full size, shared_buffers 256 MB),
# A the COPY file and a base backup, each in its guest's RAM.
readonly DB_GUEST_MEM=3G
export PG_RDMA_BENCH_ROUNDS=${PG_RDMA_BENCH_ROUNDS:-1} PG_RDMA_BENCH_COST=0
export PG_RDMA_DB_BENCH_ROUNDS=${PG_RDMA_DB_BENCH_ROUNDS:-2}
guest=(-t "$TRANSPORT_PAIR_TIMEOUT_S")
[ "$kind" = db ] && guest=(-t "$DB_PAIR_TIMEOUT_S" -m "${PG_RDMA_GUEST_MEM:-$DB_GUEST_MEM}")
exec "$ROOT/regress/rxe-guest" "${guest[@]}" -p "$(printf '%q ' "$0" --inside-b)" -- "$0" --inside-a "$kind" "$@"
