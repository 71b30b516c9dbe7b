#!/bin/bash
# Second stage of the pg_rdma test guest: runs as PID 1 on the overlaid host
# root (see regress/guest/init), with the run dir shared at $1.
#
# It creates the Soft-RoCE device, runs the host's command and reports back
# through files in the run dir, which regress/rxe-guest reads:
#   booted       this script started (the root and shares are mounted)
#   rxe-ready    rxe0 is up on 10.99.0.1, or
#   rxe-failed   why it is not (the command is then NOT run)
#   stdout, stderr   the command's output, appended as it runs
#   status       the command's exit status, written last and atomically
#   dmesg.txt    the whole kernel log, for debugging Soft-RoCE flakes
# Whatever happens, the guest powers off at the end so qemu exits.

RUN=$1
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# The guest's RDMA address plan: one dummy netdev carrying the rxe device.
# The address never leaves the guest (dummy devices have no wire).
RXE_DEV=rxe0
RXE_NETDEV=rxenet0
RXE_IP=10.99.0.1
RXE_PREFIX=24
RXE_PORT_WAIT_TENTHS=50   # rxe ports turn ACTIVE within a few 100 ms

power_off() {
  dmesg >"$RUN/dmesg.txt" 2>/dev/null
  sync
  # The host's poweroff is systemd's; busybox-static's works without it.
  busybox poweroff -f
  echo o >/proc/sysrq-trigger   # fallback: the kernel's own power-off
  sleep 60                      # PID 1 must not exit (that would panic)
}

# Runs a setup step, keeping its output; on failure records why and stops.
step() {
  local out
  if ! out=$("$@" 2>&1); then
    printf 'rxe setup step failed: %s\n%s\n' "$*" "$out" >"$RUN/rxe-failed"
    cat "$RUN/rxe-failed" >&2   # our stderr is the guest console
    power_off
  fi
}

port_active() {
  grep -q ACTIVE "/sys/class/infiniband/$RXE_DEV/ports/1/state" 2>/dev/null
}

wait_port_active() {
  local i
  for ((i = 0; i < RXE_PORT_WAIT_TENTHS; i++)); do
    port_active && return 0
    sleep 0.1
  done
  port_active
}

setup_rxe() {
  step hostname pg-rdma-guest
  step ip link set lo up
  # ib_uverbs gives /dev/infiniband/uverbs*; rdma_ucm serves librdmacm.
  step modprobe -a rdma_rxe ib_uverbs rdma_ucm dummy
  # Exclusive mode: RDMA devices belong to the namespace they were made in,
  # so a test can stand for "a machine without RDMA" with unshare(CLONE_NEWNET).
  step rdma system set netns exclusive
  step ip link add "$RXE_NETDEV" type dummy
  step ip addr add "$RXE_IP/$RXE_PREFIX" dev "$RXE_NETDEV"
  step ip link set "$RXE_NETDEV" up
  step rdma link add "$RXE_DEV" type rxe netdev "$RXE_NETDEV"
  step wait_port_active
}

run_command() {
  export RXE_DEV RXE_NETDEV RXE_IP PG_RDMA_GUEST=1
  # Verbs pin memory; the default 8 MiB lock limit is far too small.
  ulimit -l unlimited
  # job.sh restores the host environment and cwd, then execs the command.
  bash "$RUN/job.sh" </dev/null >>"$RUN/stdout" 2>>"$RUN/stderr"
  local rc=$?
  # write-then-rename: the host never reads a half-written status.
  echo "$rc" >"$RUN/status.tmp" && mv "$RUN/status.tmp" "$RUN/status"
}

: >"$RUN/booted"
setup_rxe
: >"$RUN/rxe-ready"
run_command
power_off
