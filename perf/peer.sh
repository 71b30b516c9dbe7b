# shellcheck shell=bash
# perf/peer.sh — sourced by scripts/bench and by the benchmark scripts that
# have a two-host mode (perf/run-transport-bench.sh, perf/run-db-bench.sh):
# how to reach the peer, and, for the benchmark scripts, where the servers
# run.
#
# peer_setup (the benchmark scripts) reads the environment scripts/bench
# sets: PG_RDMA_BENCH_PEER (ssh destination of the peer; unset: one host,
# the Soft-RoCE guest, which exports RXE_IP and RXE_DEV),
# PG_RDMA_BENCH_PEER_ADDR (its address on the RDMA network: servers
# listen and clients connect there), PG_RDMA_BENCH_PEER_DEVICE (its RDMA
# device; RXE_DEV's name if unset), RXE_DEV (this host's device). It sets
# PEER, SERVER_IP and PEER_DEV.

# Every ssh to the peer shares one connection (ControlMaster): a readiness
# check every 0.1 s must not cost a login each. BatchMode: a password
# prompt would wait for no one.
PEER_SSH_OPTIONS=(-n -o BatchMode=yes -o ConnectTimeout=10 -o ControlMaster=auto
                  -o "ControlPath=/tmp/pg_rdma-bench-ssh-%C" -o ControlPersist=300)

# peer_ssh_to DEST CMD...: CMD run on DEST, each word as given (ssh joins
# its arguments into one command line for the remote shell: they are
# quoted).
peer_ssh_to() {
  local dest=$1
  shift
  ssh "${PEER_SSH_OPTIONS[@]}" "$dest" "$(printf '%q ' "$@")"
}

# shellcheck disable=SC2034  # SERVER_IP and PEER_DEV: for the scripts that source this
peer_setup() {
  PEER=${PG_RDMA_BENCH_PEER:-}
  if [ -n "$PEER" ]; then
    : "${PG_RDMA_BENCH_PEER_ADDR:?PG_RDMA_BENCH_PEER_ADDR, the address of the peer on the RDMA network, is not set}"
    : "${RXE_DEV:?RXE_DEV, the RDMA device of this host, is not set}"
    SERVER_IP=$PG_RDMA_BENCH_PEER_ADDR
    PEER_DEV=${PG_RDMA_BENCH_PEER_DEVICE:-$RXE_DEV}
  else
    : "${RXE_IP:?run me inside the Soft-RoCE guest (regress/rxe-guest): RXE_IP is not set}"
    RXE_DEV=${RXE_DEV:-rxe0}
    SERVER_IP=$RXE_IP
    PEER_DEV=$RXE_DEV
  fi
  readonly PEER SERVER_IP PEER_DEV
}

# on_peer CMD...: CMD on the peer, its output here.
on_peer() { peer_ssh_to "$PEER" "$@"; }

# on_peer_within SECONDS CMD...: CMD on the peer, bounded there by
# SECONDS (a hung command is killed on the peer, not only abandoned by
# the ssh here) and here a little later (a peer that stops answering
# must not hang the run). Status 124 when either limit struck.
readonly PEER_SSH_GRACE_S=15
on_peer_within() {
  local limit=$1
  shift
  timeout -k 5 $((limit + PEER_SSH_GRACE_S)) \
    ssh "${PEER_SSH_OPTIONS[@]}" "$PEER" "$(printf '%q ' timeout -k 5 "$limit" "$@")"
}

# peer_env_lines: the peer's lines of a run's env.txt (the reports name
# both hosts from them).
peer_env_lines() {
  echo "peer=$PEER"
  echo "peer_device=$PEER_DEV"
  echo "peer_kernel=$(on_peer_within 30 uname -r)"
  echo "peer_cpus=$(on_peer_within 30 nproc)"
}
