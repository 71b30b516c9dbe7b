# shellcheck shell=bash
# regress/pg/cluster.sh — sourced (bash) by guest tests and the demo: a
# throwaway PostgreSQL 15 cluster that runs the BUILT pg_rdma, configured
# with the project's own samples (conf/). See README.md in this folder.
#
# The installation is staged by server_ext/tests/stage.sh (PostgreSQL 15 finds
# extensions only next to its own executable, so the built pg_rdma.so and SQL
# files go into a staged copy of the install layout under WORK). Run as root
# (the guest), PostgreSQL runs as the postgres user, which owns WORK.
#
# State lives in PG_CLUSTER_* variables, also saved in WORK/cluster.env so that
# a test with two clusters can switch with pg_cluster_use. Every wait is
# bounded by PG_CLUSTER_TIMEOUT seconds. Sourcing this file installs an EXIT
# trap that stops and removes every cluster (KEEP_WORK=1 keeps the files);
# a test that needs its own EXIT trap calls pg_cluster_cleanup from it.

PG_RDMA_ROOT=${PG_RDMA_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR/../..
# shellcheck source=server_ext/tests/stage.sh
. "$PG_RDMA_ROOT/server_ext/tests/stage.sh"
# shellcheck source=regress/pg/certs.sh
. "$PG_RDMA_ROOT/regress/pg/certs.sh"
# shellcheck source=regress/pg/initdb_cache.sh
. "$PG_RDMA_ROOT/regress/pg/initdb_cache.sh"
# shellcheck source=regress/pg/cluster_env.sh
. "$PG_RDMA_ROOT/regress/pg/cluster_env.sh"

PG_CLUSTER_TIMEOUT=${PG_CLUSTER_TIMEOUT:-60}
_pg_cluster_works=()

_pg_cluster_error() { echo "pg_cluster: $*" >&2; return 1; }

# _pg_cluster_write FILE [append]: stdin into (or onto the end of) FILE as the cluster's owner, so the
# server can read it whether we run as root or as an ordinary user.
_pg_cluster_write() { as_pg tee ${2:+-a} "$1" >/dev/null; }
_pg_cluster_append() { _pg_cluster_write "$1" append; }

# pg_cluster_init WORK BUILD [CONF_LINE...]
#   Stages BUILD's pg_rdma into WORK (a new or empty directory the cluster
#   then owns), runs initdb, and configures: conf/postgresql.pg_rdma.conf
#   included as is, pg_rdma.listen_addresses = $RXE_IP (127.0.0.1 outside the
#   guest), listen_addresses = '' (so TCP works only because pg_rdma added its
#   address), port PG_CLUSTER_PORT (default 54340), the Unix socket in WORK,
#   then each CONF_LINE (later lines win). pg_hba: local trust for the
#   harness, conf/pg_hba.pg_rdma.conf for the RDMA range (scram-sha-256).
#   initdb's result is cached in BUILD (initdb_cache.sh). Does not start
#   the server.
pg_cluster_init() {
    local work=${1:?pg_cluster_init WORK BUILD [CONF_LINE...]} build=${2:?pg_cluster_init WORK BUILD}
    shift 2
    # PG_CLUSTER_SO / PG_CLUSTER_CLIENT_LIBRARY: other files than BUILD's
    # (scripts/demo runs the installed packages' ones).
    local so=${PG_CLUSTER_SO:-$build/server_ext/pg_rdma.so}
    [ -f "$so" ] || { _pg_cluster_error "no $so: build first (ninja -C $build)"; return 1; }
    mkdir -p "$work" || return 1
    [ -z "$(ls -A "$work")" ] || { _pg_cluster_error "$work is not empty"; return 1; }
    _pg_cluster_works+=("$work")

    stage_install "$work" "$so" "$PG_RDMA_ROOT/server_ext" || return 1
    as_pg test -w "$work" ||
        { _pg_cluster_error "the postgres user cannot write $work (are its parents searchable?)"; return 1; }
    PG_CLUSTER_WORK=$work
    PG_CLUSTER_DATA=$work/data
    PG_CLUSTER_BIN=$STAGE_BIN
    PG_CLUSTER_PORT=${PG_CLUSTER_PORT:-54340}
    PG_CLUSTER_HOST=${RXE_IP:-127.0.0.1}
    declare -p PG_CLUSTER_WORK PG_CLUSTER_DATA PG_CLUSTER_BIN PG_CLUSTER_PORT PG_CLUSTER_HOST |
        _pg_cluster_write "$work/cluster.env"

    _pg_cluster_initdb "$PG_CLUSTER_DATA" "$build" || { _pg_cluster_error "initdb failed"; return 1; }
    _pg_cluster_write "$work/pgpass" </dev/null
    as_pg chmod 600 "$work/pgpass"

    _pg_cluster_write "$PG_CLUSTER_DATA/postgresql.pg_rdma.conf" <"$PG_RDMA_ROOT/conf/postgresql.pg_rdma.conf"
    {
        echo "# ---- added by regress/pg/cluster.sh (later lines win)"
        echo "include 'postgresql.pg_rdma.conf'"
        echo "pg_rdma.listen_addresses = '$PG_CLUSTER_HOST'"
        # The built client library, for the server's own libpq connections.
        echo "pg_rdma.client_library = '${PG_CLUSTER_CLIENT_LIBRARY:-$build/libclient/preload/libpq_rdma.so}'"
        echo "listen_addresses = ''"
        echo "port = $PG_CLUSTER_PORT"
        echo "unix_socket_directories = '$work'"
        [ $# = 0 ] || printf '%s\n' "$@"
    } | _pg_cluster_append "$PG_CLUSTER_DATA/postgresql.conf"

    {
        echo "# ---- added by regress/pg/cluster.sh: conf/pg_hba.pg_rdma.conf"
        cat "$PG_RDMA_ROOT/conf/pg_hba.pg_rdma.conf"
        # The sample names the guest's range; any other address needs its own line.
        case $PG_CLUSTER_HOST in
            10.99.0.*) ;;
            *) echo "host all all $PG_CLUSTER_HOST/32 scram-sha-256" ;;
        esac
    } | _pg_cluster_append "$PG_CLUSTER_DATA/pg_hba.conf"
}

# pg_cluster_adopt WORK: the cluster in WORK (made by pg_cluster_init in
# another shell) becomes current and is stopped by this shell's cleanup.
pg_cluster_adopt() {
    pg_cluster_use "${1:?pg_cluster_adopt WORK}" || return 1
    local work
    for work in "${_pg_cluster_works[@]}"; do [ "$work" != "$PG_CLUSTER_WORK" ] || return 0; done
    _pg_cluster_works+=("$PG_CLUSTER_WORK")
}

# pg_cluster_disown: every cluster this shell made outlives it (its cleanup
# leaves them running), for pg_cluster_adopt in a later shell.
pg_cluster_disown() { _pg_cluster_works=(); }

# pg_cluster_hba_add: the lines on stdin onto the end of the current
# cluster's pg_hba.conf (read at the next start or reload).
pg_cluster_hba_add() { _pg_cluster_append "$PG_CLUSTER_DATA/pg_hba.conf"; }

# pg_cluster_log: the server log's path.
pg_cluster_log() { echo "$PG_CLUSTER_WORK/postgres.log"; }

_pg_cluster_ctl() { as_pg "$PG_CLUSTER_BIN/pg_ctl" -D "$PG_CLUSTER_DATA" "$@"; }

# pg_cluster_start: starts and waits until it accepts connections; on
# failure prints the log's tail.
pg_cluster_start() {
    if ! _pg_cluster_ctl -l "$(pg_cluster_log)" -w -t "$PG_CLUSTER_TIMEOUT" start >/dev/null 2>&1; then
        _pg_cluster_error "the server did not start within ${PG_CLUSTER_TIMEOUT}s; log:"
        tail -n 30 "$(pg_cluster_log)" >&2
        return 1
    fi
}

# pg_cluster_stop: fast shutdown, immediate if that does not finish in time.
pg_cluster_stop() {
    _pg_cluster_ctl -m fast -w -t "$PG_CLUSTER_TIMEOUT" stop >/dev/null 2>&1 && return 0
    _pg_cluster_ctl -m immediate -w -t "$PG_CLUSTER_TIMEOUT" stop >/dev/null 2>&1
    _pg_cluster_error "fast shutdown did not finish within ${PG_CLUSTER_TIMEOUT}s; stopped immediately"
}

pg_cluster_restart() { pg_cluster_stop && pg_cluster_start; }

# wait_for SECONDS CMD...: runs CMD until it succeeds, for SECONDS of wall
# time (not a count of tries: the emulated guest's speed varies); the last
# try's status is the result.
wait_for() {
    local until=$((SECONDS + $1)); shift
    while [ "$SECONDS" -lt "$until" ]; do "$@" && return 0; sleep 0.1; done
    "$@"
}

# pg_cluster_running: true while the postmaster runs.
pg_cluster_running() { _pg_cluster_ctl status >/dev/null 2>&1; }

# pg_cluster_psql [PSQL_ARG...]: superuser psql over the Unix socket (trust),
# unaligned tuples only, stops at the first error. SQL from -c or stdin.
pg_cluster_psql() {
    as_pg "$PG_CLUSTER_BIN/psql" -X -At -v ON_ERROR_STOP=1 -h "$PG_CLUSTER_WORK" -p "$PG_CLUSTER_PORT" \
        -U postgres -d postgres "$@"
}

# pg_cluster_client CMD [ARG...]: runs a client program (psql, pgbench, a
# wrapper, env LD_PRELOAD=... psql) as the postgres OS user, aimed over TCP at
# the pg_rdma address: PGHOST, PGPORT, PGDATABASE=postgres, PGUSER (the
# caller's, else postgres), PGPASSFILE (pg_cluster_set_password's entries),
# PGSSLROOTCERT (pg_cluster_make_certs' CA, if made), PGCONNECT_TIMEOUT.
pg_cluster_client() {
    local root=${PGSSLROOTCERT:-}
    [ -n "$root" ] || [ ! -f "$PG_CLUSTER_WORK/certs/ca.crt" ] || root=$PG_CLUSTER_WORK/certs/ca.crt
    as_pg env PGHOST="$PG_CLUSTER_HOST" PGPORT="$PG_CLUSTER_PORT" PGDATABASE=postgres \
        PGUSER="${PGUSER:-postgres}" PGPASSFILE="$PG_CLUSTER_WORK/pgpass" \
        PGCONNECT_TIMEOUT="${PGCONNECT_TIMEOUT:-$PG_CLUSTER_TIMEOUT}" \
        ${root:+PGSSLROOTCERT="$root"} "$@"
}

# pg_cluster_psql_tcp CONNINFO [PSQL_ARG...]: psql over TCP to the pg_rdma
# address; CONNINFO adds keywords ("user=app sslmode=require"), may be "".
pg_cluster_psql_tcp() {
    local conninfo=${1?pg_cluster_psql_tcp CONNINFO [PSQL_ARG...]}
    shift
    pg_cluster_client psql -X -At -v ON_ERROR_STOP=1 -d "dbname=postgres $conninfo" "$@"
}

# pg_cluster_set_password ROLE PASSWORD: creates ROLE (LOGIN) if missing,
# sets its password (scram-sha-256, PostgreSQL 15's default) and records it
# in the cluster's password file for pg_cluster_client.
pg_cluster_set_password() {
    local role=${1:?pg_cluster_set_password ROLE PASSWORD} password=${2:?pg_cluster_set_password ROLE PASSWORD}
    # psql variables quote the names and the password; -c would not expand
    # them. The password comes through the environment (\getenv), which only
    # its owner can read, not on psql's command line, which anyone can.
    PG_CLUSTER_NEW_PASSWORD=$password pg_cluster_psql -q -v role="$role" <<'SQL' || return 1
\getenv password PG_CLUSTER_NEW_PASSWORD
SELECT format('CREATE ROLE %I LOGIN', :'role')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'role') \gexec
ALTER ROLE :"role" LOGIN PASSWORD :'password';
SQL
    # The password file's escapes: backslash first, then colon.
    local esc_role=${role//\\/\\\\} esc_password=${password//\\/\\\\}
    esc_role=${esc_role//:/\\:} esc_password=${esc_password//:/\\:}
    echo "*:*:*:$esc_role:$esc_password" | _pg_cluster_append "$PG_CLUSTER_WORK/pgpass"
}

# pg_cluster_cleanup: stops every cluster pg_cluster_init made in this shell
# and removes its WORK (unless KEEP_WORK=1). Safe to call twice.
pg_cluster_cleanup() {
    local work
    for work in "${_pg_cluster_works[@]}"; do
        if [ -f "$work/data/postmaster.pid" ]; then
            as_pg "$work/stage$PG_BINDIR/pg_ctl" -D "$work/data" -m immediate -w -t "$PG_CLUSTER_TIMEOUT" \
                stop >/dev/null 2>&1
        fi
        if [ -n "${KEEP_WORK:-}" ]; then
            echo "pg_cluster: kept $work" >&2
        else
            rm -rf "$work"
        fi
    done
    _pg_cluster_works=()
}

trap pg_cluster_cleanup EXIT
# A killed test (timeout(1) sends TERM) must still clean up: exiting runs EXIT.
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
