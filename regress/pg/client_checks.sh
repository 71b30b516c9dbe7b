# shellcheck shell=bash
# regress/pg/client_checks.sh — sourced after cluster.sh by the guest tests
# of client programs (drivers, poolers, the proxy): the server they share,
# and the checks they make the same way.

# pg_cluster_up_for_clients NAME BUILD [CONF_LINE...]: a started cluster
#   (WORK /tmp/pg_rdma-NAME.*) whose pg_rdma listens on the rxe address and
#   on 127.0.0.1, an address with no RDMA device behind it (for the
#   fallbacks), takes scram-sha-256 from 127.0.0.1, offers TLS
#   (pg_cluster_make_certs), has the postgres password 'secret' and the
#   extension created. CONF_LINEs as pg_cluster_init's.
pg_cluster_up_for_clients() {
    local name=$1 build=$2
    shift 2
    pg_cluster_init "$(mktemp -d "/tmp/pg_rdma-$name.XXXXXX")" "$build" \
        "pg_rdma.listen_addresses = '${RXE_IP:?run in the Soft-RoCE guest},127.0.0.1'" "$@" || return 1
    echo "host all all 127.0.0.1/32 scram-sha-256" | _pg_cluster_append "$PG_CLUSTER_DATA/pg_hba.conf" || return 1
    pg_cluster_make_certs && pg_cluster_start && pg_cluster_set_password postgres secret &&
        pg_cluster_psql -c 'create extension pg_rdma' >/dev/null
}

# Within this many seconds of psql's SIGINT the cancelled query must end
# (a CancelRequest, a new connection, then the backend's reply).
readonly PG_CANCEL_LIMIT_S=40

# pg_check_cancel OUT PSQL_ARG...: the cluster's psql, reaching the server
#   as PSQL_ARGs say (through a pooler, a proxy), runs `select pg_sleep(60)`;
#   once the server runs it psql gets SIGINT, as from Ctrl-C. Succeeds when
#   psql printed the cancel's error within PG_CANCEL_LIMIT_S; psql's output
#   is in OUT either way.
pg_check_cancel() {
    local out=$1
    shift
    _pg_sleeping() { [ -n "$(pg_cluster_psql -c "select pid from pg_stat_activity where query = 'select pg_sleep(60)'")" ]; }
    # (A background job of a script starts with SIGINT ignored; psql keeps
    # an ignored SIGINT ignored, so the signal's default is put back first.)
    python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
        "$PG_CLUSTER_BIN/psql" -X "$@" -c 'select pg_sleep(60)' >"$out" 2>&1 &
    local psql_pid=$! start rc=0
    if ! wait_for 60 _pg_sleeping; then
        kill "$psql_pid" 2>/dev/null
        echo "the query to cancel never started" >>"$out"
        return 1
    fi
    start=$SECONDS
    kill -INT "$psql_pid"
    wait "$psql_pid" || rc=$?
    grep -q 'canceling statement due to user request' "$out" || { echo "(psql's exit status $rc)" >>"$out"; return 1; }
    [ $((SECONDS - start)) -lt "$PG_CANCEL_LIMIT_S" ] || { echo "the cancel took $((SECONDS - start)) s" >>"$out"; return 1; }
}
