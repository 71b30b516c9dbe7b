#!/bin/bash
# Second stage of the pg_rdma test guest: runs as PID 1 on the overlaid host
# root (see regress/guest/init), with the run dir shared at $1.
#
# It creates the Soft-RoCE device, runs the host's command and reports back
# through files in the run dir, which regress/rxe-guest reads:
#   booted       this script started (the root and shares are mounted)
#   rxe-ready    rxe0 is up on 10.99.0.1, or
#   rxe-failed   why it is not (the command is then NOT run)
#   pair-ready   (two-host mode) the peer's rxe0 is up and its address answers, or
#   pair-failed  why not (the command is then NOT run)
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
# Two-host mode (regress/rxe-guest -p): the host writes pair.conf, which
# sets RXE_HOST (A or B), RXE_IP, RXE_PEER_IP, RXE_PAIR_DIR (a share both
# guests mount) and PAIR_WAIT_S; rxe0 then sits on the virtio NIC eth0, whose
# wire is qemu's UDP socket to the other guest. Without it: one guest, as above.
RXE_HOST='' RXE_PEER_IP='' RXE_PAIR_DIR='' PAIR_WAIT_S=0
if [ -r "$RUN/pair.conf" ]; then
  # shellcheck source=/dev/null  # written by regress/rxe-guest
  . "$RUN/pair.conf"
  RXE_NETDEV=eth0
fi
readonly PAIR_NIC_WAIT_TENTHS=100   # virtio-net's eth0 appears right after modprobe
readonly PAIR_PING_TRIES=10

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

nic_present() { [ -e "/sys/class/net/$RXE_NETDEV" ]; }

wait_nic() {
  local i
  for ((i = 0; i < PAIR_NIC_WAIT_TENTHS; i++)); do
    nic_present && return 0
    sleep 0.1
  done
  nic_present || { echo "no $RXE_NETDEV after modprobe virtio_net: $(ls /sys/class/net)"; return 1; }
}

setup_rxe() {
  local name=pg-rdma-guest netdev_module=dummy
  # Two hosts: no udev here, so the virtio NIC's driver is loaded by hand.
  [ -n "$RXE_HOST" ] && name=pg-rdma-${RXE_HOST,,} netdev_module=virtio_net
  step hostname "$name"
  step ip link set lo up
  # ib_uverbs gives /dev/infiniband/uverbs*; rdma_ucm serves librdmacm.
  step modprobe -a rdma_rxe ib_uverbs rdma_ucm "$netdev_module"
  # Exclusive mode: RDMA devices belong to the namespace they were made in,
  # so a test can stand for "a machine without RDMA" with unshare(CLONE_NEWNET).
  step rdma system set netns exclusive
  if [ -n "$RXE_HOST" ]; then
    step wait_nic
  else
    step ip link add "$RXE_NETDEV" type dummy
  fi
  step ip addr add "$RXE_IP/$RXE_PREFIX" dev "$RXE_NETDEV"
  step ip link set "$RXE_NETDEV" up
  step rdma link add "$RXE_DEV" type rxe netdev "$RXE_NETDEV"
  step wait_port_active
}

# Two-host mode: the command starts only once both guests have rxe0 up and
# each answers the other's ping over eth0, so a test never waits for a peer
# that is still booting. A peer that does not come up within PAIR_WAIT_S (the
# host's boot allowance for both attempts, plus room) fails the run here.
peer_marker() { [ -e "$RXE_PAIR_DIR/rxe-ready-$1" ]; }

pair_fail() {
  printf 'two-host setup failed (host %s, %s): %s\n' "$RXE_HOST" "$RXE_IP" "$*" >"$RUN/pair-failed"
  cat "$RUN/pair-failed" >&2
  power_off
}

join_peer() {
  local peer=B tenths=0 i
  [ "$RXE_HOST" = B ] && peer=A
  : >"$RXE_PAIR_DIR/rxe-ready-$RXE_HOST"
  until peer_marker "$peer"; do
    [ $tenths -lt $((PAIR_WAIT_S * 10)) ] ||
      pair_fail "host $peer ($RXE_PEER_IP) did not get its rxe0 up within ${PAIR_WAIT_S}s"
    sleep 0.1
    tenths=$((tenths + 1))
  done
  for ((i = 1; ; i++)); do
    busybox ping -c 1 -W 2 "$RXE_PEER_IP" >/dev/null 2>&1 && break
    [ "$i" -lt "$PAIR_PING_TRIES" ] ||
      pair_fail "host $peer ($RXE_PEER_IP) does not answer ping over $RXE_NETDEV ($PAIR_PING_TRIES tries)"
  done
  : >"$RUN/pair-ready"
}

run_command() {
  export RXE_DEV RXE_NETDEV RXE_IP PG_RDMA_GUEST=1
  [ -n "$RXE_HOST" ] && export RXE_HOST RXE_PEER_IP RXE_PAIR_DIR
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
[ -n "$RXE_HOST" ] && join_peer
run_command
power_off
