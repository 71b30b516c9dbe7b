# shellcheck shell=bash
# regress/lib/faults.sh — sourced by the two-host fault tests (suite
# 'rdma-pair'): faults on this guest's link and RDMA device in the middle of
# a session, each bounded with timeout(1), each undone by fault_restore_all
# (call it from an EXIT trap; regress/guest/run-pair-tests.sh also calls it
# after every test, for a test killed before its own cleanup ran).
#
#   fault_nic                 the netdev carrying $RXE_IP (eth0 in the guests)
#   fault_link_down SECS      link down for SECS, up again, then waits (bounded)
#                             until rxe's port is ACTIVE and the peer answers ping
#   fault_loss_on PCT         netem: drops PCT % of what this host sends
#   fault_loss_off            removes it
#   fault_device_delete       `rdma link delete $RXE_DEV` in the background
#                             (it may block in the kernel while the device is
#                             in use); its pid in FAULT_DELETE_PID, its
#                             output in FAULT_DELETE_LOG
#   fault_device_restore SECS waits up to SECS for that delete, then re-adds
#                             the device on fault_nic and waits until ACTIVE;
#                             prints what happened
#   fault_restore_all         all of the above undone, whatever state we are in
#   fault_judge LABEL LINE BOUND_S
#                             judges an `outcome: ...` line against the
#                             requirement (issue #38 item 4): intact passes;
#                             error passes only if its text names RDMA and it
#                             came at most BOUND_S after the fault's start;
#                             hang, slow (not done in time), wrong-bytes,
#                             setup-failed and a missing
#                             line fail. Prints `ok: ...` or `FAIL: ...`
#                             and returns 0 or 1.

fault_nic() {
    local nic
    nic=$(ip -o -4 addr show 2>/dev/null | awk -v ip="${RXE_IP:-}" '{ split($4, a, "/"); if (a[1] == ip) { print $2; exit } }')
    echo "${nic:-${RXE_NETDEV:-eth0}}"
}

_fault_rxe_dev() { echo "${RXE_DEV:-rxe0}"; }

_fault_port_active() { grep -q ACTIVE "/sys/class/infiniband/$(_fault_rxe_dev)/ports/1/state" 2>/dev/null; }

# _fault_wait_usable SECS: rxe's port ACTIVE and the peer answers ping.
_fault_wait_usable() {
    local until=$((SECONDS + $1))
    while [ "$SECONDS" -lt "$until" ]; do
        if _fault_port_active && timeout 3 busybox ping -c 1 -W 1 "${RXE_PEER_IP:-10.99.0.2}" >/dev/null 2>&1 &&
            _fault_has_gid; then
            return 0
        fi
        sleep 0.2
    done
    return 1
}

# rxe lists a RoCE v2 GID per address of its netdev (::ffff:a.b.c.d for IPv4).
_fault_gid_of_ip() {
    local IFS=.
    # shellcheck disable=SC2086
    set -- ${RXE_IP:-10.99.0.1}
    printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$1" "$2" "$3" "$4"
}
_fault_has_gid() { grep -qx "$(_fault_gid_of_ip)" /sys/class/infiniband/"$(_fault_rxe_dev)"/ports/1/gids/* 2>/dev/null; }
# fault_diag: what the link, the routes and rxe's GIDs look like now.
fault_diag() {
    local nic
    nic=$(fault_nic)
    echo "faults: $(ip -o -4 addr show dev "$nic" 2>&1 | awk '{ print $2, $4 }' | tr '\n' ' ') link $(cat /sys/class/net/"$nic"/operstate 2>/dev/null)"
    echo "faults: routes: $(ip -4 route show 2>&1 | tr '\n' ';')"
    echo "faults: rxe port $(cat /sys/class/infiniband/"$(_fault_rxe_dev)"/ports/1/state 2>/dev/null); GIDs: $(grep -vh '^0000:0000:0000:0000:0000:0000:0000:0000$' /sys/class/infiniband/"$(_fault_rxe_dev)"/ports/1/gids/* 2>/dev/null | tr '\n' ' ')"
    echo "faults: ping $RXE_PEER_IP: $(timeout 3 busybox ping -c 1 -W 1 "${RXE_PEER_IP:-}" 2>&1 | grep -E 'received|bad|unreach' | head -1)"
}

fault_link_down() {
    local secs=${1:?fault_link_down SECS} nic
    nic=$(fault_nic)
    timeout 10 ip link set "$nic" down || { echo "faults: ip link set $nic down failed"; return 1; }
    echo "faults: $nic down at $(date +%T.%N | cut -c1-12); $(cat "/sys/class/infiniband/$(_fault_rxe_dev)/ports/1/state" 2>/dev/null)"
    sleep "$secs"
    timeout 10 ip link set "$nic" up || { echo "faults: ip link set $nic up failed"; return 1; }
    echo "faults: $nic up at $(date +%T.%N | cut -c1-12)"
    if _fault_wait_usable 30; then
        echo "faults: rxe port ACTIVE, its GID for $RXE_IP back, and the peer answers ping again"
        fault_diag
    else
        echo "faults: 30 s after the link came up, one of these is still missing:"
        fault_diag
        return 1
    fi
}

fault_loss_on() {
    local pct=${1:?fault_loss_on PCT} nic
    nic=$(fault_nic)
    timeout 10 tc qdisc replace dev "$nic" root netem loss "$pct%" ||
        { echo "faults: tc qdisc netem on $nic failed (sch_netem?)"; return 1; }
    echo "faults: netem loss $pct% on what $nic sends: $(tc qdisc show dev "$nic" root | head -1)"
}

fault_loss_off() {
    local nic stats
    nic=$(fault_nic)
    stats=$(tc -s qdisc show dev "$nic" root 2>/dev/null | grep -o 'Sent.*dropped [0-9]*' | head -1)
    timeout 10 tc qdisc del dev "$nic" root 2>/dev/null &&
        echo "faults: netem removed from $nic (${stats:-no stats})"
}

FAULT_DELETE_PID='' FAULT_DELETE_LOG=''
fault_device_delete() {
    FAULT_DELETE_LOG=$(mktemp /tmp/pg_rdma-fault-delete.XXXXXX)
    # Not `timeout`: a delete blocked in the kernel cannot be killed anyway;
    # fault_device_restore bounds the wait for it.
    (
        del_start=$EPOCHREALTIME
        rdma link delete "$(_fault_rxe_dev)" >>"$FAULT_DELETE_LOG" 2>&1
        del_rc=$?
        echo "exit $del_rc after $(awk -v a="$del_start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s" >>"$FAULT_DELETE_LOG"
    ) &
    FAULT_DELETE_PID=$!
    echo "faults: rdma link delete $(_fault_rxe_dev) started at $(date +%T.%N | cut -c1-12)"
}

fault_device_restore() {
    local secs=${1:?fault_device_restore SECS} until dev nic
    dev=$(_fault_rxe_dev)
    nic=$(fault_nic)
    until=$((SECONDS + secs))
    if [ -n "$FAULT_DELETE_PID" ]; then
        while kill -0 "$FAULT_DELETE_PID" 2>/dev/null && [ "$SECONDS" -lt "$until" ]; do sleep 0.2; done
        if kill -0 "$FAULT_DELETE_PID" 2>/dev/null; then
            echo "faults: rdma link delete $dev has not returned after ${secs} s more; where it waits:"
            local p
            for p in $(pgrep -P "$FAULT_DELETE_PID") "$FAULT_DELETE_PID"; do
                echo "   pid $p ($(cat /proc/"$p"/comm 2>/dev/null)): wchan $(cat /proc/"$p"/wchan 2>/dev/null)"
                sed 's/^/     /' /proc/"$p"/stack 2>/dev/null | head -n 12
            done
            return 1
        fi
        echo "faults: rdma link delete $dev: $(tr '\n' ' ' <"$FAULT_DELETE_LOG")"
        FAULT_DELETE_PID=
    fi
    if [ ! -e "/sys/class/infiniband/$dev" ]; then
        timeout 30 rdma link add "$dev" type rxe netdev "$nic" || { echo "faults: rdma link add $dev failed"; return 1; }
        echo "faults: $dev re-added on $nic"
    fi
    if _fault_wait_usable 30; then
        echo "faults: $dev ACTIVE again"
    else
        echo "faults: $dev not ACTIVE (or no ping) 30 s after re-adding it"
        return 1
    fi
}

fault_restore_all() {
    local nic dev
    nic=$(fault_nic) dev=$(_fault_rxe_dev)
    tc qdisc del dev "$nic" root 2>/dev/null
    timeout 10 ip link set "$nic" up 2>/dev/null
    if [ ! -e "/sys/class/infiniband/$dev" ] && ! pgrep -x rdma >/dev/null; then
        timeout 30 rdma link add "$dev" type rxe netdev "$nic" 2>/dev/null
    fi
    return 0
}

# fault_judge LABEL LINE BOUND_S (see above).
fault_judge() {
    local label=$1 line=$2 bound=$3 what after err
    if [ -z "$line" ]; then
        echo "FAIL: $label: no outcome line (the program was killed or crashed)"
        return 1
    fi
    what=$(awk '{ print $2 }' <<<"$line")
    after=$(grep -o 'after_fault_s=[-0-9.]*' <<<"$line" | cut -d= -f2)
    err=$(grep -o 'error=".*"' <<<"$line")
    case $what in
        intact)
            echo "ok: $label: carried on, every byte intact (${line#outcome: })"
            return 0 ;;
        error)
            local bad=0
            if ! grep -qi 'rdma' <<<"$err"; then
                echo "FAIL: $label: ended with an error that does not name RDMA: $err"
                bad=1
            fi
            if [ -z "$after" ] || awk -v a="$after" 'BEGIN { exit !(a < 0) }'; then
                echo "FAIL: $label: ended with an error before the fault started: $err"
                bad=1
            elif awk -v a="$after" -v b="$bound" 'BEGIN { exit !(a > b) }'; then
                echo "FAIL: $label: the error came ${after} s after the fault, later than ${bound} s (keepalive_timeout + slack): $err"
                bad=1
            fi
            [ "$bad" = 1 ] && return 1
            echo "ok: $label: ended with an error naming RDMA ${after} s after the fault: $err"
            return 0 ;;
        hang)
            echo "FAIL: $label: HANG: neither carried on nor failed (${line#outcome: })"
            return 1 ;;
        slow)
            echo "FAIL: $label: carried on but did not finish within its limit, every byte so far intact (${line#outcome: })"
            return 1 ;;
        wrong-bytes)
            echo "FAIL: $label: WRONG BYTES delivered (${line#outcome: })"
            return 1 ;;
        *)
            echo "FAIL: $label: ${line#outcome: }"
            return 1 ;;
    esac
}

# fault_rxe_recreate: deletes and re-adds the rxe device (no process may be
# using it: a delete waits for its users), for a host whose rxe no longer
# completes new connections after a link flap; prints the state before.
fault_rxe_recreate() {
    local dev nic
    dev=$(_fault_rxe_dev) nic=$(fault_nic)
    echo "faults: before re-creating $dev:"
    fault_diag
    fault_device_delete
    fault_device_restore 60
}
