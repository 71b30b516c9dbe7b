#!/usr/bin/env bash
# Two hosts (suite 'rdma-pair', regress/run-pair-suite): RoCE v2 blocked by
# a firewall while TCP stays open. Host A (server) runs a throwaway
# PostgreSQL 15 with the built pg_rdma on 10.99.0.1 (regress/pg/cluster.sh,
# pg_rdma.connect_timeout = 5s); host B (client) connects with
# `pgrdma psql` across the virtual link:
#   baseline  with_rsocket=require works over RDMA across the link
#   then B drops incoming UDP dport 4791 (RoCE v2) on its INPUT chain
#   (nftables), TCP untouched; a plain psql (control) still works, and
#   (a) with_rsocket=true lands on TCP, the query runs, within BOUND_S
#   (b) with_rsocket=true connect_timeout=6 lands on TCP, the query runs
#   (c) with_rsocket=require fails within BOUND_S, saying why
#   (d) psql's CPU time (user + sys) for (a) is printed (not asserted)
#   (e) without the rule, with_rsocket=require is over RDMA again.
# `pgrdma doctor` says "RDMA works" across the link before the rule, and
# under it names the firewall (exit 4, cause firewall, UDP port 4791).
# Not OUTPUT: with outgoing RoCE dropped, Debian 6.1's kernel CM hangs for
# good in rdma_destroy_id, so no client could ever end.
# Every client call runs under timeout(1); every check runs and says what
# went wrong; the test fails if any did.
# Usage: roce_blocked_fallback_test.sh BUILD_DIR PGRDMA (side: PG_RDMA_PAIR_ROLE)
set -uo pipefail
build=$1 pgrdma=$2
root=$(cd "$(dirname "$(readlink -f "$0")")/../../.." && pwd)
# shellcheck source=regress/lib/pair.sh
. "$root/regress/lib/pair.sh"
pair_require

readonly PORT=54510 PASSWORD=pair-test-secret
readonly SERVER_CONNECT_TIMEOUT=5s   # pg_rdma.connect_timeout (default 10s)
BOUND_S=40                           # an attempt that ends within this is bounded; set from the baseline below
readonly SLACK_S=6                   # past the baseline and the server's connect_timeout: teardown, a slow guest
readonly CALL_LIMIT_S=60             # timeout(1) around each client call
readonly READY_WAIT_S=400            # client: for the server (initdb may be uncached)
readonly END_WAIT_S=700              # server: for the client's side to end
readonly NFT_TABLE=pg_rdma_pair_test
readonly QUERY="select transport from pg_stat_rdma where pid = pg_backend_pid()"

# ---------------------------------------------------------------- host A

server() {
    # shellcheck source=regress/pg/cluster.sh
    . "$root/regress/pg/cluster.sh"
    PG_CLUSTER_PORT=$PORT
    echo "server: host $RXE_HOST, $RXE_IP; client host $RXE_PEER_IP"
    pg_cluster_init "$(mktemp -d /tmp/pg_rdma-pair-server.XXXXXX)" "$build" \
        "pg_rdma.connect_timeout = $SERVER_CONNECT_TIMEOUT" "log_connections = on" ||
        { echo "FAIL: server: pg_cluster_init failed"; exit 1; }
    pg_cluster_start || { echo "FAIL: server: PostgreSQL did not start"; exit 1; }
    pg_cluster_set_password postgres "$PASSWORD" && pg_cluster_psql -c 'create extension pg_rdma' >/dev/null ||
        { echo "FAIL: server: setting up the role or the extension failed"; exit 1; }
    echo "server: PostgreSQL 15 with pg_rdma listening on" \
        "$(pg_cluster_psql -c 'show pg_rdma.listen_addresses'):$PORT," \
        "pg_rdma.connect_timeout = $(pg_cluster_psql -c 'show pg_rdma.connect_timeout')"
    grep -v '^#' "$PG_CLUSTER_DATA/pg_hba.conf" | grep 10.99.0.0/24 | sed 's/^/server: pg_hba: /'
    pair_signal ready "$RXE_IP $PORT"

    local client_exit rc=0
    client_exit=$(pair_wait_end "$END_WAIT_S") || rc=1
    echo "server: the client side ended${client_exit:+ with exit $client_exit}"
    if pg_cluster_running; then
        echo "server: still running; sessions left: $(pg_cluster_psql -c \
            "select count(*) from pg_stat_activity where backend_type = 'client backend' and pid <> pg_backend_pid()")"
    else
        echo "FAIL: server: the postmaster is gone"
        rc=1
    fi
    echo "server: its log:"
    sed 's/^/  | /' "$(pg_cluster_log)"
    pg_cluster_stop
    echo "server: served the client side until it ended (exit ${client_exit:-unknown}); server side $([ "$rc" = 0 ] && echo passed || echo FAILED)"
    return "$rc"
}

# ---------------------------------------------------------------- host B

failures=()
ok() { echo "ok: $*"; }
failed() { echo "FAIL: $*"; failures+=("$*"); }

# A psql still running after BOUND_S: where each of its threads waits (the
# kernel's view), for whoever has to find out why it is not bounded.
watch_psql() {
    local pid t until=$((SECONDS + BOUND_S))
    # Short sleeps: killed early, this leaves no sleep(1) behind for long.
    while [ "$SECONDS" -lt "$until" ]; do sleep 1; done
    pid=$(cat "$work/pid" 2>/dev/null) && [ -d "/proc/$pid" ] || return 0
    echo "   still running after ${BOUND_S} s; where psql (pid $pid) waits:"
    for t in /proc/"$pid"/task/*; do
        echo "     thread ${t##*/} ($(cat "$t/comm" 2>/dev/null)): wchan $(cat "$t/wchan" 2>/dev/null)"
        sed 's/^/       /' "$t/stack" 2>/dev/null | head -n 12
    done
}

# call CONNINFO: pgrdma psql with CONNINFO and QUERY under timeout(1). Sets
# RC, OUT, WALL (s), CPU_USER and CPU_SYS (s, of psql and the
# wrappers, counted by bash's `time`), and prints them with stderr.
call() {
    local TIMEFORMAT='%R %U %S' watcher
    echo "\$ pgrdma psql \"$1\" -c \"$QUERY\""
    rm -f "$work/pid"
    watch_psql >"$work/watch" 2>&1 &
    watcher=$!
    # The pid written is psql's: pgrdma and the shell exec it. `time` in a
    # subshell of its own: the CPU it counts is that of timeout(1) and what
    # it waited for (the shell, pgrdma, psql), never the watcher's.
    # shellcheck disable=SC2016  # $$ and $@ belong to that shell
    (time timeout -k 5 "$CALL_LIMIT_S" bash -c 'echo $$ >"$0"; exec "$@"' "$work/pid" \
        "$pgrdma" "$PSQL" -X -At -v ON_ERROR_STOP=1 -d "$1" -c "$QUERY" \
        >"$work/out" 2>"$work/err") 2>"$work/time"
    RC=$?
    kill "$watcher" 2>/dev/null
    wait "$watcher" 2>/dev/null
    read -r WALL CPU_USER CPU_SYS <"$work/time"
    OUT=$(cat "$work/out")
    echo "   exit $RC, ${WALL} s wall, CPU ${CPU_USER} s user + ${CPU_SYS} s sys, transport '${OUT}'"
    show_err
    cat "$work/watch"
}

# stderr of the last call, at most ERR_LINES lines; the rest counted (a
# client in a loop may repeat one line thousands of times).
readonly ERR_LINES=12
show_err() {
    awk -v max="$ERR_LINES" '
        NR <= max { print "   stderr: " $0; next }
        { more++; seen[$0]++ }
        END {
            if (!more) exit
            top = ""; n = 0
            for (l in seen) if (seen[l] > n) { n = seen[l]; top = l }
            printf "   stderr: ... %d more lines (%d of them: \"%s\")\n", more, n, top
        }' "$work/err"
}

killed() { [ "$RC" = 124 ] || [ "$RC" = 137 ]; }
within_bound() { awk -v w="$WALL" -v b="$BOUND_S" 'BEGIN { exit !(w < b) }'; }
# stderr of the last call on one line, for a failure message: its first
# lines, and how many more there were.
err_line() {
    local total
    total=$(wc -l <"$work/err")
    head -n 3 "$work/err" | tr '\n' ' ' | cut -c1-400
    [ "$total" -le 3 ] || printf '(+%d more lines)' $((total - 3))
}

# expect_session LABEL TRANSPORT: the last call connected, ran the query and
# its session reported TRANSPORT; with BOUNDED, within BOUND_S.
expect_session() {
    local label=$1 want=$2 bounded=${3:-} bad=0
    if killed; then
        failed "$label: psql did not end within ${CALL_LIMIT_S} s (killed by timeout, exit $RC): the attempt is not bounded; stderr: $(err_line)"
        return
    fi
    [ "$RC" = 0 ] || { failed "$label: psql failed (exit $RC) instead of running the query; stderr: $(err_line)"; bad=1; }
    [ "$RC" != 0 ] || [ "$OUT" = "$want" ] ||
        { failed "$label: the session reports transport '$OUT', expected '$want'"; bad=1; }
    if [ -n "$bounded" ] && ! within_bound; then
        failed "$label: took ${WALL} s, not under the ${BOUND_S} s bound"
        bad=1
    fi
    [ "$bad" = 1 ] || ok "$label: query ran, session on $want, ${WALL} s"
}

# doctor LABEL EXIT CAUSE TEXT: `pgrdma doctor` on the server ends with
# EXIT, names CAUSE and prints TEXT (a fixed string) in its verdict.
doctor() {
    local label=$1 want_exit=$2 want_cause=$3 want_text=$4 rc=0
    echo "\$ pgrdma doctor $server_target"
    timeout -k 5 "$CALL_LIMIT_S" "$pgrdma" doctor "$server_target" >"$work/doctor" 2>&1 || rc=$?
    sed 's/^/   | /' "$work/doctor"
    if [ "$rc" != "$want_exit" ]; then
        failed "$label: pgrdma doctor exited $rc, expected $want_exit"
    elif ! grep -qx "cause: *$want_cause (exit $want_exit)" "$work/doctor"; then
        failed "$label: pgrdma doctor did not name the cause $want_cause"
    elif ! grep '^verdict:' "$work/doctor" | grep -qF "$want_text"; then
        failed "$label: pgrdma doctor's verdict lacks \"$want_text\""
    else
        ok "$label: pgrdma doctor: $(grep '^verdict:' "$work/doctor" | sed 's/^verdict: *//')"
    fi
}

rule_on() { pair_drop_roce "$NFT_TABLE"; }
rule_off() { pair_allow_roce "$NFT_TABLE"; }
rule_list() { pair_list_roce "$NFT_TABLE"; }

client() {
    local info host port conn
    work=$(mktemp -d /tmp/pg_rdma-pair-client.XXXXXX)
    # Whatever happens, the rule goes (timeout(1) sends TERM).
    trap 'rule_off; rm -rf "$work"' EXIT
    trap 'exit 143' TERM
    trap 'exit 130' INT
    PSQL=$(pg_config --bindir)/psql   # the program itself, not Debian's wrapper script
    echo "client: host $RXE_HOST, $RXE_IP; $(rdma link show 2>&1 | head -1)"
    info=$(pair_wait ready "$READY_WAIT_S") || { echo "FAIL: the server never got ready"; exit 1; }
    read -r host port <<<"$info"
    echo "client: server ready at $host:$port"
    server_target=$host:$port
    echo "*:*:*:postgres:$PASSWORD" >"$work/pgpass"
    chmod 600 "$work/pgpass"
    export PGPASSFILE=$work/pgpass
    conn="host=$host port=$port user=postgres dbname=postgres"

    echo
    echo "== baseline: RDMA across the link"
    call "$conn with_rsocket=require"
    expect_session "baseline with_rsocket=require across the link" rdma
    # A fallen-back attempt costs a session (the baseline) plus at most the
    # server's connect_timeout, which the client never outwaits.
    BOUND_S=$(awk -v w="$WALL" -v t="${SERVER_CONNECT_TIMEOUT%s}" -v s="$SLACK_S" 'BEGIN { printf "%d", w + t + s + 0.999 }')
    echo "   bound for a fallen-back attempt: ${BOUND_S} s"
    doctor "baseline doctor" 0 works "RDMA works to $server_target via rxe0 (RoCE v2, MTU"

    echo
    echo "== incoming RoCE v2 (udp dport $PAIR_ROCE_V2_PORT) dropped on $RXE_HOST's INPUT chain; TCP open"
    if ! rule_on; then
        failed "installing the nftables rule failed; the checks under it are not run"
    else
        rule_list
        call "$conn"
        expect_session "control: plain psql (no with_rsocket) under the rule" tcp

        echo
        echo "== (a) with_rsocket=true falls back to TCP"
        call "$conn with_rsocket=true"
        expect_session "(a) with_rsocket=true under the rule" tcp bounded
        echo "== (d) psql's CPU time for (a): ${CPU_USER} s user + ${CPU_SYS} s sys over ${WALL} s wall (printed, not asserted)"

        echo
        echo "== (b) with_rsocket=true connect_timeout=6"
        call "$conn with_rsocket=true connect_timeout=6"
        expect_session "(b) with_rsocket=true connect_timeout=6 under the rule" tcp bounded

        echo
        echo "== (c) with_rsocket=require fails, in bounded time, saying why"
        call "$conn with_rsocket=require"
        if killed; then
            failed "(c) with_rsocket=require: psql did not end within ${CALL_LIMIT_S} s (killed by timeout): the failure is not bounded; stderr: $(err_line)"
        elif [ "$RC" = 0 ]; then
            failed "(c) with_rsocket=require succeeded (transport '$OUT') although RoCE is blocked"
        else
            local bad=0
            within_bound || { failed "(c) with_rsocket=require failed but took ${WALL} s, not under ${BOUND_S} s"; bad=1; }
            grep -q 'with_rsocket' "$work/err" ||
                { failed "(c) with_rsocket=require failed without saying RDMA was the reason: $(err_line)"; bad=1; }
            grep -q 'UDP port 4791' "$work/err" ||
                { failed "(c) with_rsocket=require did not say what to check (UDP port 4791): $(err_line)"; bad=1; }
            [ "$bad" = 1 ] || ok "(c) with_rsocket=require failed in ${WALL} s: $(err_line)"
        fi

        echo
        echo "== pgrdma doctor names the firewall"
        doctor "doctor under the rule" 4 firewall "the RDMA connection to the server's RDMA port timed out, while TCP to it works"
        grep -q 'UDP port 4791' "$work/doctor" || failed "doctor under the rule: its fix does not name UDP port 4791"

        echo
        echo "== the rule's count of dropped RoCE packets, then it goes"
        rule_list
        rule_off || failed "removing the nftables rule failed"
    fi

    echo
    echo "== (e) without the rule: RDMA again"
    call "$conn with_rsocket=require"
    expect_session "(e) with_rsocket=require after the rule is gone" rdma

    echo
    if [ ${#failures[@]} -gt 0 ]; then
        echo "${#failures[@]} check(s) failed:"
        printf '  %s\n' "${failures[@]}"
        return 1
    fi
    echo "all checks passed: RoCE blocked, with_rsocket=true falls back to TCP in bounded time, require fails clearly"
}

case $(pair_role) in
    server) server ;;
    client) client ;;
    *) echo "unknown role '$(pair_role)'"; exit 1 ;;
esac
