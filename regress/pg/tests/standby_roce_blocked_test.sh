#!/usr/bin/env bash
# Two hosts (suite 'rdma-pair', regress/run-pair-suite): a standby whose
# walreceiver asks for RDMA (primary_conninfo with_rsocket=true) while RoCE
# is blocked between it and its primary, TCP open. Host A is the primary, a
# real PostgreSQL 15 with the built pg_rdma; host B takes a base backup of
# it over TCP and runs it as a standby with pg_rdma preloaded (its
# walreceiver's libpq goes through pg_rdma.client_library).
#   1. With incoming RoCE v2 dropped on B's INPUT chain, the standby streams
#      over TCP (the walsender's pg_stat_rdma row says tcp) and replays.
#   2. With the rule gone, a new walreceiver streams over RDMA.
# Usage: standby_roce_blocked_test.sh BUILD_DIR (PG_RDMA_ROOT in the environment)
set -uo pipefail
build=$1
root=$(cd "$(dirname "$(readlink -f "$0")")/../../.." && pwd)
# shellcheck source=regress/lib/pair.sh
. "$root/regress/lib/pair.sh"
pair_require

readonly PORT=54520 STANDBY_PORT=54521 PASSWORD=pair-standby-secret
readonly SERVER_CONNECT_TIMEOUT=5s   # pg_rdma.connect_timeout on the primary
readonly STREAM_WAIT_S=90            # for the standby to stream (a TCG guest starts slowly)
readonly READY_WAIT_S=400
readonly END_WAIT_S=700
readonly NFT_TABLE=pg_rdma_pair_standby

# ---------------------------------------------------------------- host A

primary() {
    # shellcheck source=regress/pg/cluster.sh
    . "$root/regress/pg/cluster.sh"
    PG_CLUSTER_PORT=$PORT
    pg_cluster_init "$(mktemp -d /tmp/pg_rdma-pair-primary.XXXXXX)" "$build" \
        "pg_rdma.connect_timeout = $SERVER_CONNECT_TIMEOUT" "log_connections = on" ||
        { echo "FAIL: primary: pg_cluster_init failed"; exit 1; }
    pg_cluster_start || { echo "FAIL: primary: PostgreSQL did not start"; exit 1; }
    pg_cluster_set_password postgres "$PASSWORD" && pg_cluster_psql -c 'create extension pg_rdma' \
        -c 'create table rep (id int primary key)' >/dev/null ||
        { echo "FAIL: primary: setting up the role, the extension or the table failed"; exit 1; }
    pair_signal ready "$RXE_IP $PORT"
    local standby_exit rc=0
    standby_exit=$(pair_wait_end "$END_WAIT_S") || rc=1
    pg_cluster_running || { echo "FAIL: primary: the postmaster is gone"; rc=1; }
    echo "primary: its log (pg_rdma and replication lines):"
    grep -E 'pg_rdma|replication' "$(pg_cluster_log)" | sed 's/^/  | /' | tail -40
    pg_cluster_stop
    echo "primary: served until the standby side ended (exit ${standby_exit:-unknown}); $([ "$rc" = 0 ] && echo passed || echo FAILED)"
    return "$rc"
}

# ---------------------------------------------------------------- host B

rule_on() { pair_drop_roce "$NFT_TABLE"; }
rule_off() { pair_allow_roce "$NFT_TABLE"; }

standby() {
    local info host port
    # shellcheck source=regress/pg/cluster.sh
    . "$root/regress/pg/cluster.sh"
    trap 'rule_off; pg_cluster_cleanup' EXIT
    fail() { echo "FAIL: $*"; echo "--- the standby's log (tail):"; tail -30 "$(pg_cluster_log)" 2>/dev/null; exit 1; }
    info=$(pair_wait ready "$READY_WAIT_S") || fail "the primary never got ready"
    read -r host port <<<"$info"
    on_primary() {
        as_pg env PGPASSFILE="$PG_CLUSTER_WORK/primary.pgpass" "$PG_CLUSTER_BIN/psql" -X -At -v ON_ERROR_STOP=1 \
            -d "host=$host port=$port user=postgres dbname=postgres" "$@"
    }
    walsender_transport() {
        on_primary -c "select r.transport from pg_stat_replication s join pg_stat_rdma r using (pid)
                       where s.state = 'streaming' and s.application_name = 'standby1'" 2>/dev/null
    }

    PG_CLUSTER_PORT=$STANDBY_PORT
    pg_cluster_init "$(mktemp -d /tmp/pg_rdma-pair-standby.XXXXXX)" "$build" || fail "pg_cluster_init failed"
    echo "*:*:*:postgres:$PASSWORD" | as_pg tee "$PG_CLUSTER_WORK/primary.pgpass" >/dev/null
    as_pg chmod 600 "$PG_CLUSTER_WORK/primary.pgpass"

    rule_on || fail "the nftables rule could not be added"
    echo "standby: incoming RoCE v2 (udp dport $PAIR_ROCE_V2_PORT) dropped on $RXE_HOST's INPUT chain; TCP open"

    # A base backup over plain TCP, then this host's own addresses and port.
    as_pg rm -rf "$PG_CLUSTER_DATA"
    as_pg env PGPASSFILE="$PG_CLUSTER_WORK/primary.pgpass" "$PG_CLUSTER_BIN/pg_basebackup" \
        -d "host=$host port=$port user=postgres" -D "$PG_CLUSTER_DATA" -c fast 2>"$PG_CLUSTER_WORK/basebackup.err" ||
        fail "pg_basebackup of the primary: $(cat "$PG_CLUSTER_WORK/basebackup.err")"
    as_pg touch "$PG_CLUSTER_DATA/standby.signal"
    printf '%s\n' "listen_addresses = ''" "pg_rdma.listen_addresses = ''" "port = $STANDBY_PORT" \
        "unix_socket_directories = '$PG_CLUSTER_WORK'" \
        "primary_conninfo = 'host=$host port=$port user=postgres application_name=standby1 passfile=$PG_CLUSTER_WORK/primary.pgpass with_rsocket=true'" |
        as_pg tee -a "$PG_CLUSTER_DATA/postgresql.conf" >/dev/null
    pg_cluster_start || fail "the standby did not start"

    # 1. RoCE blocked: the walreceiver lands on TCP and streams.
    on_tcp() { [ "$(walsender_transport)" = tcp ]; }
    local t0=$SECONDS
    wait_for "$STREAM_WAIT_S" on_tcp ||
        fail "with RoCE blocked the standby did not stream over TCP within ${STREAM_WAIT_S} s (walsender: '$(walsender_transport)'; wal receiver: $(pg_cluster_psql -c 'select status from pg_stat_wal_receiver' 2>&1))"
    echo "standby: streaming over TCP $((SECONDS - t0)) s after the standby started"
    on_primary -c "insert into rep select generate_series(1, 100)" >/dev/null || fail "insert on the primary"
    replayed() { [ "$(pg_cluster_psql -c 'select count(*) from rep' 2>/dev/null)" = "$1" ]; }
    wait_for 60 replayed 100 || fail "the standby did not replay over TCP"
    grep -q 'RDMA is not possible' "$(pg_cluster_log)" || fail "the standby's log does not say why it is on TCP"
    echo "ok: with RoCE blocked the standby streams and replays over TCP; its log: $(grep -m1 'RDMA is not possible' "$(pg_cluster_log)" | cut -c1-240)"

    # 2. RoCE allowed again: the next walreceiver streams over RDMA.
    rule_off || fail "removing the nftables rule failed"
    # A walreceiver is no backend to pg_terminate_backend on 15: SIGTERM
    # ends it, and the startup process starts another.
    local receiver
    receiver=$(pg_cluster_psql -c 'select pid from pg_stat_wal_receiver')
    [ -n "$receiver" ] && kill -TERM "$receiver" || fail "no walreceiver to restart"
    echo "standby: RoCE allowed again; walreceiver $receiver told to end"

    on_rdma() { [ "$(walsender_transport)" = rdma ]; }
    wait_for "$STREAM_WAIT_S" on_rdma ||
        fail "with RoCE allowed the standby did not stream over RDMA again (walsender: '$(walsender_transport)')"
    on_primary -c "insert into rep select generate_series(101, 200)" >/dev/null || fail "insert on the primary"
    wait_for 60 replayed 200 || fail "the standby did not replay over RDMA"
    echo "ok: with RoCE allowed again a new walreceiver streams and replays over RDMA"
    echo "all checks passed: a standby streams over TCP while RoCE is blocked and over RDMA once it is not"
}

case $(pair_role) in
    server) primary ;;
    client) standby ;;
    *) echo "unknown role '$(pair_role)'"; exit 1 ;;
esac
