#!/usr/bin/env bash
# Two hosts (suite 'rdma-pair', regress/run-pair-suite): a fault in the
# middle of a PostgreSQL session over RDMA. Checks issue #38 item 4: "With
# the device removed, the link down for 5 s, or 1 % packet loss during a
# 100 MB COPY and during an idle session, a session either carries on with
# every byte intact or ends with a clear error naming RDMA, within
# keepalive_timeout; never a hang, never a wrong byte."
#
# Host A runs a throwaway PostgreSQL 15 with the built pg_rdma on 10.99.0.1
# (regress/pg/cluster.sh, default keepalive 2 s / 20 s); host B runs
# `pgrdma psql` with with_rsocket=require across the link. Two cases:
#   copy  COPY (SELECT i, repeat(md5(i::text), 30) FROM generate_series(1,
#         100000)) TO STDOUT, ~97 MB, into a file; its md5 must equal the
#         one A computed over its Unix socket; then the session's
#         pg_stat_rdma transport. The fault starts once 20 MB arrived.
#   idle  psql fed from a fifo: a query (its pid, transport), the fault at
#         once, IDLE_S idle, then a second query (transport, md5 of
#         1..100000 checked) and \q.
# FAULT (the argument): link_down (B's NIC down 5 s), loss (netem 1 % on
# what each host sends, until the case ends), device_removal (`rdma link
# delete rxe0` on A; re-added and the server restarted after each case).
# Host B prints `outcome: intact|error|wrong-bytes|hang ...` per case
# (transport= after the fault when the session carried on; error= psql's
# stderr; after_fault_s=, and for idle after_query_s= since the second
# query, the first moment psql can notice); host A prints the backend's
# fate (`server: backend PID ended N s after the fault` and its log lines).
# B's line is judged by fault_judge (regress/lib/faults.sh): intact passes;
# an error passes only if it names RDMA within keepalive_timeout + SLACK_S
# (copy: of the fault; idle: of the second query, psql being blocked on its
# input until then); a hang (timeout(1) ends psql) or a wrong byte fails.
# A fails if the backend of a session B lost is still there BOUND_S after
# the fault and B's end (a backend hanging on a dead session).
# Usage: fault_session_test.sh FAULT BUILD_DIR PGRDMA (side: PG_RDMA_PAIR_ROLE)
set -uo pipefail
fault=$1 build=$2 pgrdma=$3
root=$(cd "$(dirname "$(readlink -f "$0")")/../../.." && pwd)
# shellcheck source=regress/lib/pair.sh
. "$root/regress/lib/pair.sh"
# shellcheck source=regress/lib/faults.sh
. "$root/regress/lib/faults.sh"
pair_require

readonly PORT=54520 PASSWORD=pair-fault-secret
readonly KEEPALIVE_TIMEOUT_S=20   # pg_rdma.keepalive_timeout default
readonly SLACK_S=10
readonly BOUND_S=$((KEEPALIVE_TIMEOUT_S + SLACK_S))
readonly ROWS=100000 MARK_BYTES=$((20 * 1024 * 1024))
readonly COPY_SQL="COPY (SELECT i, repeat(md5(i::text), 30) FROM generate_series(1, $ROWS) i) TO STDOUT"
readonly TRANSPORT_SQL="select 'transport=' || coalesce((select transport from pg_stat_rdma where pid = pg_backend_pid()), 'none')"
readonly IDLE_S=35
readonly COPY_LIMIT_S=240         # timeout(1) around the COPY's psql: past it, a hang
readonly QUERY_WAIT_S=$BOUND_S    # idle: for the second query's answer or psql's end
readonly READY_WAIT_S=400 WAIT_S=400

case $fault in
    link_down) fault_host=B ;;
    loss) fault_host=both ;;
    device_removal) fault_host=A ;;
    *) echo "usage: fault_session_test.sh link_down|loss|device_removal BUILD_DIR PGRDMA"; exit 2 ;;
esac
me=$RXE_HOST
failures=0
fault_file() { echo "$PG_RDMA_PAIR_DIR/$([ "$fault_host" = A ] && echo A || echo B).fault-$1"; }
now() { echo "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="${2:-$EPOCHREALTIME}" 'BEGIN { printf "%.2f", b - a }'; }

# wait_file PATH SECS: 0 once PATH exists, 1 after SECS or once done-CASE exists ($3).
wait_file() {
    local until=$((SECONDS + $2))
    while [ ! -e "$1" ]; do
        [ "$SECONDS" -lt "$until" ] || return 1
        [ -n "${3:-}" ] && [ -e "$3" ] && return 1
        sleep 0.1
    done
}

# apply_fault CASE: at B's fault point, this host's part of the fault.
apply_fault() {
    local c=$1
    wait_file "$PG_RDMA_PAIR_DIR/B.point-$c" "$WAIT_S" "$PG_RDMA_PAIR_DIR/done-$c" ||
        { echo "faults: no fault point for case $c"; return 1; }
    case $fault in
        link_down) [ "$me" = B ] && { pair_signal "fault-$c"; fault_link_down 5; } ;;
        loss) fault_loss_on 1; [ "$me" = B ] && pair_signal "fault-$c" ;;
        device_removal) [ "$me" = A ] && { pair_signal "fault-$c"; fault_device_delete; } ;;
    esac
    return 0
}

# ---------------------------------------------------------------- host A

# The sessions pg_stat_rdma_outcomes counts as moved onto TCP.
failed_overs() { pg_cluster_psql -c "select sessions from pg_stat_rdma_outcomes where outcome = 'failed_over'" 2>/dev/null; }

server_case() {
    local c=$1 mode=$2 faulter pid="" t_fault="" t_gone="" t_client_end="" log_lines state moved_before
    moved_before=$(failed_overs)
    : >"$work/fault-$c.log"
    apply_fault "$c" >"$work/fault-$c.log" 2>&1 &
    faulter=$!
    pair_signal "ready-$c"
    # The session's backend: the one that runs the COPY, or the pid B sends.
    local until=$((SECONDS + WAIT_S))
    while [ -z "$pid" ] && [ "$SECONDS" -lt "$until" ] && [ ! -e "$PG_RDMA_PAIR_DIR/B.end-$c" ]; do
        if [ "$mode" = copy ]; then
            pid=$(pg_cluster_psql -c "select pid from pg_stat_activity where query like 'COPY (SELECT i%' and pid <> pg_backend_pid() limit 1" 2>/dev/null)
        elif [ -e "$PG_RDMA_PAIR_DIR/B.pid-$c" ]; then
            pid=$(cat "$PG_RDMA_PAIR_DIR/B.pid-$c")
        fi
        [ -n "$pid" ] || sleep 0.2
    done
    echo "server: case $c's backend: ${pid:-not found}; $(pg_cluster_psql -c "select 'transport ' || transport || ' device ' || coalesce(device, '') from pg_stat_rdma where pid = ${pid:-0}" 2>/dev/null)"
    # Watch it until B's side of the case has ended, and then for BOUND_S more.
    until=$((SECONDS + WAIT_S))
    while [ "$SECONDS" -lt "$until" ]; do
        [ -z "$t_fault" ] && [ -e "$(fault_file "$c")" ] && t_fault=$(now)
        [ -z "$t_client_end" ] && [ -e "$PG_RDMA_PAIR_DIR/B.end-$c" ] && t_client_end=$(now)
        if [ -z "$t_gone" ] && [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then t_gone=$(now); fi
        if [ -n "$t_client_end" ]; then
            [ -n "$t_gone" ] && break
            [ "$(since "$t_client_end" | cut -d. -f1)" -ge "$BOUND_S" ] && break
            grep -q '^outcome: intact' "$PG_RDMA_PAIR_DIR/B.end-$c" 2>/dev/null && ! grep -q 'transport=none' "$PG_RDMA_PAIR_DIR/B.end-$c" && break
        fi
        sleep 0.2
    done
    local until2=$((SECONDS + 60))
    while kill -0 "$faulter" 2>/dev/null && [ "$SECONDS" -lt "$until2" ]; do sleep 0.2; done
    kill "$faulter" 2>/dev/null
    wait "$faulter" 2>/dev/null
    sed 's/^/   /' "$work/fault-$c.log"
    log_lines=$(grep -a "\[${pid:-none}\]" "$(pg_cluster_log)" | grep -av 'LOG:  statement' | tail -n 8)
    [ -n "$log_lines" ] && sed 's/^/   server log | /' <<<"$log_lines"
    local client_line
    client_line=$(cat "$PG_RDMA_PAIR_DIR/B.end-$c" 2>/dev/null)
    if [ -n "$t_gone" ]; then
        state="backend $pid ended $([ -n "$t_fault" ] && since "$t_fault" "$t_gone" || echo '?') s after the fault"
    elif [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        state="backend $pid still there $([ -n "$t_fault" ] && since "$t_fault" || echo '?') s after the fault"
    else
        state="no backend seen"
    fi
    echo "server: case $c ($fault during $mode): $state; client: ${client_line:-no outcome}"
    if [ -n "$pid" ] && [ -z "$t_gone" ] && ! grep -q '^outcome: intact' <<<"$client_line"; then
        echo "FAIL: server: the backend of a session the client lost is still there ${BOUND_S} s after the client's end (a hang on the server side)"
        failures=$((failures + 1))
    fi
    # A session that carried on over TCP is counted once as failed_over.
    if grep -q '^outcome: intact.* transport=tcp' <<<"$client_line"; then
        local moved
        moved=$(failed_overs)
        if [ "$moved" = $((moved_before + 1)) ]; then
            echo "server: pg_stat_rdma_outcomes counts it: failed_over $moved_before -> $moved; $(pg_cluster_psql -c "select string_agg(device || ' failovers ' || failovers, ', ') from pg_stat_rdma_devices" 2>/dev/null)"
        else
            echo "FAIL: server: the session moved onto TCP, and pg_stat_rdma_outcomes counts failed_over $moved_before -> ${moved:-?}"
            failures=$((failures + 1))
        fi
    fi
    if [ "$fault" = device_removal ]; then
        # The device comes back, and the server with it (its listener was on the old device).
        if ! fault_device_restore 30; then
            echo "server: the delete is still blocked; stopping PostgreSQL, which may hold the device"
            pg_cluster_stop
            fault_device_restore 60 || { echo "FAIL: server: rxe0 could not be restored"; failures=$((failures + 1)); }
        fi
        pg_cluster_stop >/dev/null 2>&1
        pg_cluster_start || { echo "FAIL: server: PostgreSQL did not start again"; failures=$((failures + 1)); }
    elif [ "$fault" = loss ]; then
        fault_loss_off
    fi
    pair_signal "server-end-$c"
}

server() {
    # shellcheck source=regress/pg/cluster.sh
    . "$root/regress/pg/cluster.sh"
    PG_CLUSTER_PORT=$PORT
    work=$(mktemp -d /tmp/pg_rdma-fault-server.XXXXXX)
    chmod 755 "$work"
    trap 'fault_restore_all; pg_cluster_cleanup; rm -rf "$work"' EXIT
    trap 'exit 143' TERM
    echo "server: host $RXE_HOST, $RXE_IP, NIC $(fault_nic); fault $fault on $fault_host"
    pg_cluster_init "$work/pg" "$build" "log_connections = on" "log_disconnections = on" \
        "log_line_prefix = '%m [%p] '" ||
        { echo "FAIL: server: pg_cluster_init failed"; exit 1; }
    pg_cluster_start || { echo "FAIL: server: PostgreSQL did not start"; exit 1; }
    pg_cluster_set_password postgres "$PASSWORD" && pg_cluster_psql -c 'create extension pg_rdma' >/dev/null ||
        { echo "FAIL: server: setting up the role or the extension failed"; exit 1; }
    local t0 md5 bytes
    t0=$(now)
    pg_cluster_psql -c "$COPY_SQL" >"$work/copy.ref" || { echo "FAIL: server: the reference COPY failed"; exit 1; }
    md5=$(md5sum <"$work/copy.ref" | awk '{ print $1 }')
    bytes=$(stat -c %s "$work/copy.ref")
    rm -f "$work/copy.ref"
    echo "server: the COPY over the Unix socket: $bytes bytes, md5 $md5 ($(since "$t0") s)"
    pair_signal ready "$RXE_IP $PORT $md5 $bytes"
    server_case 1 copy
    server_case 2 idle
    pair_wait_end "$WAIT_S" >/dev/null
    echo "server: the log's pg_rdma lines:"
    grep -ai 'rdma' "$(pg_cluster_log)" | tail -n 30 | sed 's/^/  | /'
    [ "$failures" = 0 ] || { echo "$failures server-side check(s) failed"; return 1; }
    echo "server side: every backend ended or carried on in bounded time"
}

# ---------------------------------------------------------------- host B

# The fault's start on this host's clock, when its file appears (background).
clock_fault() {
    wait_file "$(fault_file "$1")" "$WAIT_S" "$PG_RDMA_PAIR_DIR/done-$1" && now >"$work/fault-at-$1"
}
fault_after() { [ -s "$work/fault-at-$1" ] && since "$(cat "$work/fault-at-$1")" "$2" || echo -1; }
err_text() { tr '\n' ' ' <"$1" | tr '"' "'" | cut -c1-400; }

client_copy() {
    local c=1 faulter clock t0 t_end rc got_md5 got_bytes line tline
    pair_wait "ready-$c" "$WAIT_S" >/dev/null || { echo "FAIL: no ready-$c from A"; failures=$((failures + 1)); return; }
    echo; echo "== $fault during a ${EXPECT_BYTES}-byte COPY (case $c)"
    apply_fault "$c" >"$work/fault-$c.log" 2>&1 & faulter=$!
    clock_fault "$c" & clock=$!
    t0=$(now)
    timeout -k 5 "$COPY_LIMIT_S" "$pgrdma" "$PSQL" -X -At -v ON_ERROR_STOP=1 -d "$CONN with_rsocket=require" \
        -c "$COPY_SQL" -c "$TRANSPORT_SQL" >"$work/copy.out" 2>"$work/copy.err" &
    local p=$! marked=0
    while kill -0 "$p" 2>/dev/null; do
        if [ "$marked" = 0 ] && [ "$(stat -c %s "$work/copy.out" 2>/dev/null || echo 0)" -ge "$MARK_BYTES" ]; then
            marked=1
            echo "fault point: $(stat -c %s "$work/copy.out") bytes after $(since "$t0") s"
            pair_signal "point-$c"
        fi
        sleep 0.1
    done
    wait "$p"; rc=$?
    t_end=$(now)
    : >"$PG_RDMA_PAIR_DIR/done-$c"
    wait_pids "$faulter" "$clock"
    sed 's/^/   /' "$work/fault-$c.log"
    tline=$(tail -n 1 "$work/copy.out")
    got_bytes=$(head -n -1 "$work/copy.out" | wc -c)
    got_md5=$(head -n -1 "$work/copy.out" | md5sum | awk '{ print $1 }')
    local common
    common="side=client mode=copy rc=$rc bytes=$(stat -c %s "$work/copy.out") elapsed_s=$(since "$t0" "$t_end") after_fault_s=$(fault_after "$c" "$t_end")"
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        line="outcome: hang $common why=\"psql did not end within ${COPY_LIMIT_S} s\" error=\"$(err_text "$work/copy.err")\""
    elif [ "$rc" = 0 ] && [[ $tline == transport=* ]]; then
        if [ "$got_md5" = "$EXPECT_MD5" ]; then
            line="outcome: intact $common $tline"
        else
            line="outcome: wrong-bytes $common got_bytes=$got_bytes md5=$got_md5 expected_md5=$EXPECT_MD5"
        fi
    else
        line="outcome: error $common error=\"$(err_text "$work/copy.err")\""
    fi
    [ "$rc" = 0 ] || { echo "   psql's stderr:"; head -n 8 "$work/copy.err" | sed 's/^/     /'; }
    grep 'with_rsocket:' "$work/copy.err" | sed 's/^/   psql: /'
    # A session that moved onto TCP says so once on the client's stderr.
    if [[ $line == "outcome: intact"* && $tline == transport=tcp ]] &&
        ! grep -q 'with_rsocket: RDMA failed (.*); the session goes on over its TCP connection' "$work/copy.err"; then
        echo "FAIL: the COPY's session moved onto TCP and psql's stderr has no failover warning"
        failures=$((failures + 1))
    fi
    report_case "$c" "$line" "$BOUND_S"
    rm -f "$work/copy.out"
}

client_idle() {
    local c=2 faulter clock t0 t_q2 t_end rc=0 line pid transport1 out2
    pair_wait "ready-$c" "$WAIT_S" >/dev/null || { echo "FAIL: no ready-$c from A"; failures=$((failures + 1)); return; }
    echo; echo "== $fault during an idle session (case $c)"
    apply_fault "$c" >"$work/fault-$c.log" 2>&1 & faulter=$!
    clock_fault "$c" & clock=$!
    mkfifo "$work/in"
    t0=$(now)
    timeout -k 5 $((IDLE_S + 3 * BOUND_S)) stdbuf -oL "$pgrdma" "$PSQL" -X -At -d "$CONN with_rsocket=require" \
        <"$work/in" >"$work/idle.out" 2>"$work/idle.err" &
    local p=$!
    exec 3>"$work/in"
    echo "select 'q1', pg_backend_pid(), (select transport from pg_stat_rdma where pid = pg_backend_pid());" >&3
    local until=$((SECONDS + 60))
    while ! grep -q '^q1|' "$work/idle.out" && kill -0 "$p" 2>/dev/null && [ "$SECONDS" -lt "$until" ]; do sleep 0.1; done
    IFS='|' read -r _ pid transport1 < <(grep '^q1|' "$work/idle.out")
    echo "first query: backend ${pid:-?}, transport ${transport1:-?} ($(since "$t0") s)"
    if [ -n "${pid:-}" ]; then
        pair_signal "pid-$c" "$pid"
        pair_signal "point-$c"
        sleep "$IDLE_S"
        kill -0 "$p" 2>/dev/null || echo "psql ended while idle: $(err_text "$work/idle.err")"
        t_q2=$(now)
        echo "select 'q2', (select transport from pg_stat_rdma where pid = pg_backend_pid()), md5(string_agg(i::text, ',' order by i)) from generate_series(1, 100000) i;" >&3 2>/dev/null
        until=$((SECONDS + QUERY_WAIT_S))
        while ! grep -q '^q2|' "$work/idle.out" && kill -0 "$p" 2>/dev/null && [ "$SECONDS" -lt "$until" ]; do sleep 0.1; done
        t_end=$(now)
    else
        t_q2=$(now) t_end=$t_q2
    fi
    out2=$(grep '^q2|' "$work/idle.out")
    echo '\q' >&3 2>/dev/null
    exec 3>&-
    local still=0
    kill -0 "$p" 2>/dev/null && still=1
    until=$((SECONDS + 15))
    while kill -0 "$p" 2>/dev/null && [ "$SECONDS" -lt "$until" ]; do sleep 0.1; done
    kill -0 "$p" 2>/dev/null && kill "$p"
    wait "$p"; rc=$?
    : >"$PG_RDMA_PAIR_DIR/done-$c"
    wait_pids "$faulter" "$clock"
    sed 's/^/   /' "$work/fault-$c.log"
    local expect2 common
    expect2=$(seq -s, 1 100000 | tr -d '\n' | md5sum | awk '{ print $1 }')
    common="side=client mode=idle rc=$rc backend=${pid:-?} transport_before=${transport1:-?} elapsed_s=$(since "$t0" "$t_end") after_fault_s=$(fault_after "$c" "$t_end") after_query_s=$(since "$t_q2" "$t_end")"
    if [ -n "$out2" ]; then
        local tr2 md52
        IFS='|' read -r _ tr2 md52 <<<"$out2"
        if [ "$md52" = "$expect2" ]; then
            line="outcome: intact $common transport=${tr2:-none}"
        else
            line="outcome: wrong-bytes $common md5=$md52 expected_md5=$expect2"
        fi
    elif [ "$still" = 1 ] && [ -z "$(cat "$work/idle.err")" ]; then
        line="outcome: hang $common why=\"no answer to the second query within ${QUERY_WAIT_S} s, psql still running, no error\""
    else
        line="outcome: error $common error=\"$(err_text "$work/idle.err")\""
    fi
    [ -s "$work/idle.err" ] && { echo "   psql's stderr:"; head -n 8 "$work/idle.err" | sed 's/^/     /'; }
    report_case "$c" "$line" "$BOUND_S" after_query_s
}

wait_pids() {
    local until=$((SECONDS + 60)) p
    for p in "$@"; do
        while kill -0 "$p" 2>/dev/null && [ "$SECONDS" -lt "$until" ]; do sleep 0.2; done
        kill "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
}

# report_case CASE LINE BOUND [FIELD]: prints, judges (FIELD's time instead
# of after_fault_s), tells A, waits for A's end of the case.
report_case() {
    local c=$1 line=$2 bound=$3 field=${4:-} judged=$2
    echo "case: $fault $([ "$c" = 1 ] && echo copy || echo idle) client $line"
    [ -n "$field" ] && judged=$(sed -E "s/after_fault_s=/fault_s=/; s/${field}=/after_fault_s=/" <<<"$line")
    fault_judge "$fault during $([ "$c" = 1 ] && echo 'a COPY' || echo 'an idle session') (psql)" "$judged" "$bound" ||
        failures=$((failures + 1))
    [ "$fault" = loss ] && fault_loss_off
    # After a flap B's rxe0 completed no new connection: a fresh device (no
    # psql of this test is left to hold it).
    [ "$fault" = link_down ] && fault_rxe_recreate
    pair_signal "end-$c" "$line"
    pair_wait "server-end-$c" "$WAIT_S" >/dev/null || echo "   (no server-end-$c from A)"
}

client() {
    work=$(mktemp -d /tmp/pg_rdma-fault-client.XXXXXX)
    trap 'fault_restore_all; rm -rf "$work"' EXIT
    trap 'exit 143' TERM
    trap '' PIPE   # psql may be gone when the idle case writes its next query
    PSQL=$(pg_config --bindir)/psql
    echo "client: host $RXE_HOST, $RXE_IP, NIC $(fault_nic); fault $fault on $fault_host"
    local info host port
    info=$(pair_wait ready "$READY_WAIT_S") || { echo "FAIL: the server never got ready"; exit 1; }
    read -r host port EXPECT_MD5 EXPECT_BYTES <<<"$info"
    echo "*:*:*:postgres:$PASSWORD" >"$work/pgpass"
    chmod 600 "$work/pgpass"
    export PGPASSFILE=$work/pgpass
    CONN="host=$host port=$port user=postgres dbname=postgres"
    local start=$SECONDS
    client_copy
    client_idle
    echo
    echo "test time (client side): $((SECONDS - start)) s"
    [ "$failures" = 0 ] || { echo "$failures check(s) failed: the requirement (issue #38 item 4) is not met for $fault"; return 1; }
    echo "$fault: both cases met the requirement"
}

case $(pair_role) in
    server) server ;;
    client) client ;;
    *) echo "unknown role '$(pair_role)'"; exit 1 ;;
esac
