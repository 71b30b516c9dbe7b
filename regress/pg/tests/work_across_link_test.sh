#!/usr/bin/env bash
# Two hosts (suite 'rdma-pair', regress/run-pair-suite): ordinary work over
# RDMA across a link, where the RoCE packets cross both hosts' IP stacks and
# the virtual NIC (RoCE MTU from the link, not loopback's shortcut). Host A
# runs a throwaway PostgreSQL 15 with the built pg_rdma and TLS on
# 10.99.0.1; host B is the client, every program through `pgrdma` with
# with_rsocket=require:
#   1. TLS: psql with sslmode=require; pg_stat_ssl and pg_stat_rdma agree.
#   2. COPY in of ~20 MB from B, counted and checksummed on A (over its Unix
#      socket) against B's file.
#   3. A cancel: pg_sleep(60) interrupted by psql's SIGINT handler.
#   4. pgbench -S, 8 clients for a few seconds, no failed transaction; and
#      pgbench -C (a new session per transaction).
#   5. Every session B made was on RDMA: A's log has one upgrade line per
#      session (log_connections) and no RDMA failure.
# The single-host suites (regress/README.md) test the rest of the product
# over one guest's loopback.
# Usage: work_across_link_test.sh BUILD_DIR PGRDMA (side: PG_RDMA_PAIR_ROLE)
set -uo pipefail
build=$1 pgrdma=$2
root=$(cd "$(dirname "$(readlink -f "$0")")/../../.." && pwd)
# shellcheck source=regress/lib/pair.sh
. "$root/regress/lib/pair.sh"
pair_require

readonly PORT=54530 PASSWORD=pair-work-secret
readonly READY_WAIT_S=400 END_WAIT_S=900
readonly COPY_ROWS=200000        # ~20 MB of COPY text
readonly PGBENCH_SCALE=2 PGBENCH_S=8 PGBENCH_CLIENTS=8 PGBENCH_CONNECT_S=5
readonly STEP_LIMIT_S=240        # timeout(1) around each client program

# ---------------------------------------------------------------- host A

server() {
    # shellcheck source=regress/pg/cluster.sh
    . "$root/regress/pg/cluster.sh"
    # shellcheck source=regress/pg/certs.sh
    . "$root/regress/pg/certs.sh"
    PG_CLUSTER_PORT=$PORT
    pg_cluster_init "$(mktemp -d /tmp/pg_rdma-pair-work.XXXXXX)" "$build" "log_connections = on" \
        "max_connections = 40" || { echo "FAIL: server: pg_cluster_init failed"; exit 1; }
    pg_cluster_make_certs || { echo "FAIL: server: no certificates"; exit 1; }
    pg_cluster_start || { echo "FAIL: server: PostgreSQL did not start"; exit 1; }
    pg_cluster_set_password postgres "$PASSWORD" &&
        pg_cluster_psql -c 'create extension pg_rdma' -c 'create table t (i int, s text)' >/dev/null ||
        { echo "FAIL: server: setting up the role, the extension or the table failed"; exit 1; }
    as_pg "$PG_CLUSTER_BIN/pgbench" -q -i -s "$PGBENCH_SCALE" -h "$PG_CLUSTER_WORK" -p "$PORT" -U postgres postgres \
        >/dev/null 2>&1 || { echo "FAIL: server: pgbench -i failed"; exit 1; }
    pair_signal ready "$RXE_IP $PORT"
    # B's COPY is checked here, over the Unix socket, against B's checksum.
    local copied
    if copied=$(pair_wait copied "$END_WAIT_S"); then
        pair_signal copy-sum "$(pg_cluster_psql -c "select count(*) || ' ' || md5(string_agg(i || ',' || s, E'\n' order by i)) from t")"
    fi
    local rc=0 client_exit sessions upgraded log
    sessions=$(pair_wait sessions "$END_WAIT_S")
    client_exit=$(pair_wait_end "$END_WAIT_S") || rc=1
    [ "${client_exit:-1}" = 0 ] || rc=1
    log=$(pg_cluster_log)
    upgraded=$(grep -c 'pg_rdma: connection upgraded' "$log")
    # Every session B made was upgraded, and no other (pgbench -C may open
    # one more that it ends unused at its deadline).
    if [ -z "$sessions" ] || [ "$upgraded" -lt "$sessions" ] || [ "$upgraded" -gt $((sessions + 1)) ]; then
        echo "FAIL: server: B made $sessions sessions, $upgraded were upgraded"
        rc=1
    fi
    pg_cluster_running || { echo "FAIL: server: the postmaster is gone"; rc=1; }
    grep -q 'terminated by signal' "$log" && { echo "FAIL: server: a backend crashed"; rc=1; }
    # Every session stayed on RDMA. A session whose client went while the
    # backend was still sending (pgbench ends its clients at -T mid-query)
    # may log "RDMA session ... failed", as PostgreSQL over TCP logs "could
    # not send data to client": shown, not failed.
    grep -E 'pg_rdma: .*(moved onto TCP|RDMA not possible|upgrade failed)' "$log" | head -5 | sed 's/^/FAIL: server log: /' | grep . && rc=1
    grep -E 'pg_rdma: RDMA session .* failed' "$log" | head -3 | sed 's/^/server: (a client gone mid-query) /'
    echo "server: $upgraded RDMA sessions from $RXE_PEER_IP, B counted ${sessions:-none} (COPY: ${copied:-none})"
    pg_cluster_stop
    echo "server: served until the client side ended (exit ${client_exit:-unknown}); $([ "$rc" = 0 ] && echo passed || echo FAILED)"
    return "$rc"
}

# ---------------------------------------------------------------- host B

client() {
    local info host port work
    info=$(pair_wait ready "$READY_WAIT_S") || { echo "FAIL: the server never got ready"; exit 1; }
    read -r host port <<<"$info"
    # shellcheck source=regress/pg/cluster.sh
    . "$root/regress/pg/cluster.sh"  # for as_pg and wait_for only: no cluster here
    local bin
    bin=$(pg_config --bindir)
    work=$(mktemp -d /tmp/pg_rdma-pair-work-client.XXXXXX)
    chmod 755 "$work"
    echo "$host:$port:*:postgres:$PASSWORD" >"$work/pgpass"
    chown postgres "$work/pgpass" && chmod 600 "$work/pgpass"
    fail() { echo "FAIL: $*"; exit 1; }
    run() {
        as_pg env PGHOST="$host" PGPORT="$port" PGUSER=postgres PGDATABASE=postgres PGPASSFILE="$work/pgpass" \
            PGCONNECT_TIMEOUT=60 timeout "$STEP_LIMIT_S" "$pgrdma" "$@"
    }
    rpsql() {
        local conninfo=$1
        shift
        run "$bin/psql" -X -At -v ON_ERROR_STOP=1 -d "dbname=postgres with_rsocket=require $conninfo" "$@"
    }
    local me="select transport from pg_stat_rdma where pid = pg_backend_pid()"
    local sessions=0 out

    # 1. TLS over RDMA across the link.
    out=$(rpsql "sslmode=require" -c "select ssl, ($me) from pg_stat_ssl where pid = pg_backend_pid()" 2>&1) ||
        fail "sslmode=require over RDMA: $out"
    [ "$out" = "t|rdma" ] || fail "sslmode=require: pg_stat_ssl/pg_stat_rdma say '$out'"
    sessions=$((sessions + 1))
    echo "ok: TLS over RDMA across the link (pg_stat_ssl: ssl, pg_stat_rdma: rdma)"

    # 2. COPY in, checked on A.
    seq 1 "$COPY_ROWS" | awk '{ printf "%d\t%s%s%s\n", $1, "row-", $1, "-abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789" }' \
        >"$work/copy.txt"
    chmod 644 "$work/copy.txt"
    out=$(rpsql "" -c "\\copy t from '$work/copy.txt'" 2>&1) || fail "COPY in over RDMA: $out"
    sessions=$((sessions + 1))
    local mine theirs
    mine="$COPY_ROWS $(awk -F'\t' '{ print $1 "," $2 }' "$work/copy.txt" | sort -n | sed -z 's/\n$//' | md5sum | cut -d' ' -f1)"
    pair_signal copied "$(du -k "$work/copy.txt" | cut -f1) kB"
    theirs=$(pair_wait copy-sum 120) || fail "no checksum from the server"
    [ "$mine" = "$theirs" ] || fail "COPY in: B sent '$mine', A holds '$theirs'"
    echo "ok: COPY in of $(du -k "$work/copy.txt" | cut -f1) kB over RDMA across the link, every row (A: $theirs)"

    # 3. A cancel across the link: psql's SIGINT handler sends it (the
    # signal goes to psql itself, not to the wrappers around it).
    # It is interrupted once the server shows it sleeping (asked over plain
    # TCP, which counts no RDMA session).
    local t0=$SECONDS psql_pid
    rpsql "application_name=cancel-me" -c "select pg_sleep(60)" >"$work/cancel.out" 2>&1 &
    psql_pid=$!
    sleeping() {
        [ "$(as_pg env PGPASSFILE="$work/pgpass" "$bin/psql" -X -At -d "host=$host port=$port user=postgres dbname=postgres" \
            -c "select count(*) from pg_stat_activity where application_name = 'cancel-me' and wait_event = 'PgSleep'" \
            2>/dev/null)" = 1 ]
    }
    if ! wait_for 60 sleeping; then
        kill "$psql_pid" 2>/dev/null
        wait "$psql_pid"
        fail "the query to cancel never started: $(cat "$work/cancel.out")"
    fi
    pkill -INT -f "^$bin/psql .*application_name=cancel-me" || fail "no psql to interrupt"
    wait "$psql_pid"
    out=$(cat "$work/cancel.out")
    grep -q 'canceling statement due to user request' <<<"$out" || fail "the cancel did not reach the server: $out"
    [ $((SECONDS - t0)) -lt 50 ] || fail "the cancelled query ran on for $((SECONDS - t0)) s"
    sessions=$((sessions + 1))
    echo "ok: a query cancelled across the link ($((SECONDS - t0)) s)"

    # 4. pgbench over RDMA: many sessions at once, then one per transaction.
    out=$(run "$bin/pgbench" -n -S -c "$PGBENCH_CLIENTS" -j 2 -T "$PGBENCH_S" \
        "dbname=postgres with_rsocket=require" 2>&1) || fail "pgbench -S over RDMA: $out"
    grep -q 'number of transactions actually processed: [1-9]' <<<"$out" || fail "pgbench -S: $out"
    grep -q 'number of failed transactions: [1-9]' <<<"$out" && fail "pgbench -S had failures: $out"
    sessions=$((sessions + PGBENCH_CLIENTS + 1))  # and pgbench's own look at the tables
    echo "ok: pgbench -S, $PGBENCH_CLIENTS clients over RDMA across the link: $(grep -E '^tps' <<<"$out" | head -1)"
    out=$(run "$bin/pgbench" -n -S -C -c 1 -T "$PGBENCH_CONNECT_S" \
        "dbname=postgres with_rsocket=require" 2>&1) || fail "pgbench -S -C over RDMA: $out"
    local made
    made=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
    [ "${made:-0}" -ge 1 ] || fail "pgbench -S -C made no transaction: $out"
    sessions=$((sessions + made + 1))
    echo "ok: pgbench -S -C over RDMA across the link: $made sessions, $(grep -E '^average connection time' <<<"$out")"

    # 5. The server counted them: one upgrade per session B made (pgbench -C
    # may have opened one more that it ended unused at the deadline).
    pair_signal sessions "$sessions"
    rm -rf "$work"
    echo "all checks passed: TLS, COPY, a cancel and pgbench over RDMA across the link ($sessions sessions)"
}

case $(pair_role) in
    server) server ;;
    client) client ;;
    *) echo "unknown role '$(pair_role)'"; exit 1 ;;
esac
