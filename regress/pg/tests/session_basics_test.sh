#!/usr/bin/env bash
# The basics of an RDMA session on whichever PostgreSQL major the build is
# for (scripts/test runs it on 15, 17 and 18): psql through pgrdma with
# with_rsocket=require, TLS over RDMA (and 17's direct SSL, with and
# without RDMA), a cancel from psql (Ctrl-C, libpq's PQcancel; on 18 also
# with protocol 3.2's long cancel key), a cancel with libpq 17's
# PQcancelCreate API (17+), and pg_terminate_backend; the postmaster
# survives all of it. Each check asks
# the server which transport the session used (pg_stat_rdma, pg_stat_ssl).
# With PG_RDMA_FOREIGN_CLIENT_LIBRARY set to a libpq_rdma.so built against
# another major's libpq (scripts/test sets it to the default build's for
# the other majors), psql of this major also runs over RDMA under that one:
# the client library works with whichever libpq the program loads.
# Usage: session_basics_test.sh BUILD_DIR CANCEL_API PG_MAJOR   (in the guest, as root)
set -euo pipefail
build=$1 cancel_api=$2 major=$3
: "${RXE_IP:?run in the Soft-RoCE guest (regress/run-rdma-suite)}"
# shellcheck source=regress/pg/cluster.sh
. "$(dirname "$(readlink -f "$0")")/../cluster.sh"
pgrdma=$build/libclient/pgrdma
PG_CLUSTER_PORT=54450
pg_cluster_init "$(mktemp -d /tmp/pg_rdma-basics.XXXXXX)" "$build"
pg_cluster_make_certs
pg_cluster_start
pg_cluster_set_password app secret
pg_cluster_psql -c 'create extension pg_rdma' -c 'grant pg_read_all_stats to app' >/dev/null
# shellcheck source=regress/pg/session_test_lib.sh
. "$(dirname "$(readlink -f "$0")")/../session_test_lib.sh"
sleeper_pid() { pg_cluster_psql -c "select pid from pg_stat_activity where query = 'select pg_sleep($1)' and state = 'active'"; }

# 1. A session over RDMA, on the major the build is for.
out=$(rpsql "" -c "select current_setting('server_version_num')::int / 10000, ($me)") || fail "psql over RDMA: $out"
[ "$out" = "$major|rdma" ] || fail "psql with_rsocket=require: server major and transport '$out', want '$major|rdma'"
echo "ok: psql over RDMA to PostgreSQL $major"

# 1b. libpq_rdma.so built against another libpq, in this major's psql.
foreign=${PG_RDMA_FOREIGN_CLIENT_LIBRARY:-}
if [ -n "$foreign" ]; then
    [ -r "$foreign" ] || fail "PG_RDMA_FOREIGN_CLIENT_LIBRARY=$foreign cannot be read"
    out=$(PGUSER=app pg_cluster_client env LD_PRELOAD="$foreign" psql -X -At -v ON_ERROR_STOP=1 \
        -d "dbname=postgres with_rsocket=require" -c "select ($me)") || fail "psql $major under $foreign: $out"
    [ "$out" = rdma ] || fail "psql $major under $foreign: transport '$out'"
    echo "ok: psql $major (libpq $(pg_config --version | awk '{print $2}')) over RDMA under a libpq_rdma.so built elsewhere ($foreign)"
fi

# 2. TLS over RDMA.
out=$(rpsql "sslmode=verify-ca" -c "select ssl, ($me) from pg_stat_ssl where pid = pg_backend_pid()") ||
    fail "sslmode=verify-ca over RDMA: $out"
[ "$out" = "t|rdma" ] || fail "sslmode=verify-ca: pg_stat_ssl/pg_stat_rdma say '$out'"
echo "ok: sslmode=verify-ca over RDMA (pg_stat_ssl: ssl, pg_stat_rdma: rdma)"

# 2b. 17's direct SSL: the first packet is a TLS ClientHello, not an
#     SSLRequest. Asked for RDMA, the session is upgraded first and the
#     handshake runs over RDMA; not asked, pg_rdma leaves it to PostgreSQL.
if [ "$major" -ge 17 ]; then
    out=$(rpsql "sslmode=verify-ca sslnegotiation=direct" -c "select ssl, ($me) from pg_stat_ssl where pid = pg_backend_pid()") ||
        fail "sslnegotiation=direct over RDMA: $out"
    [ "$out" = "t|rdma" ] || fail "sslnegotiation=direct with RDMA: pg_stat_ssl/pg_stat_rdma say '$out'"
    out=$(client psql -X -At -v ON_ERROR_STOP=1 -d "dbname=postgres with_rsocket=false sslmode=verify-ca sslnegotiation=direct" \
        -c "select ssl, ($me) from pg_stat_ssl where pid = pg_backend_pid()") || fail "sslnegotiation=direct on TCP: $out"
    [ "$out" = "t|tcp" ] || fail "sslnegotiation=direct without RDMA: pg_stat_ssl/pg_stat_rdma say '$out'"
    echo "ok: direct SSL (sslnegotiation=direct) over RDMA when asked, and left to PostgreSQL on TCP when not"
fi

# 3. Ctrl-C in psql: libpq's PQcancel from psql's signal handler.
rpsql "" -c 'select pg_sleep(61)' >"$work/cancel.out" 2>&1 &
job=$!
has_sleeper() { [ -n "$(sleeper_pid "$1")" ]; }
wait_for 30 has_sleeper 61 || fail "the query to cancel did not start"
[ "$(pg_cluster_psql -c "select transport from pg_stat_rdma where pid = $(sleeper_pid 61)")" = rdma ] ||
    fail "the session to cancel is not on RDMA"
# SIGINT to psql itself (the job is runuser/env around it).
pkill -INT -f '^[^ ]*psql .*pg_sleep\(61\)' || fail "no psql to interrupt"
wait "$job" && fail "the cancelled psql exited 0"
grep -q 'canceling statement due to user request' "$work/cancel.out" ||
    fail "psql's cancel did not cancel the query: $(cat "$work/cancel.out")"
echo "ok: Ctrl-C in psql cancels a query of its RDMA session"

# 3b. 18's protocol 3.2: the cancel key is 32 bytes, so the CancelRequest is
#     longer than 3.0's 16; it is still no session (no row, no log line).
if [ "$major" -ge 18 ]; then
    out=$(rpsql "max_protocol_version=3.2" -c '\conninfo') || fail "psql with max_protocol_version=3.2: $out"
    grep -q '3\.2' <<<"$out" || fail "the session did not use protocol 3.2: $out"
    tcp_lines() { grep -c 'pg_rdma: connection on TCP' "$log" || true; }
    before=$(tcp_lines)
    rpsql "max_protocol_version=3.2" -c 'select pg_sleep(63)' >"$work/cancel32.out" 2>&1 &
    job=$!
    wait_for 30 has_sleeper 63 || fail "the 3.2 query to cancel did not start"
    pkill -INT -f '^[^ ]*psql .*pg_sleep\(63\)' || fail "no psql to interrupt"
    wait "$job" && fail "the cancelled 3.2 psql exited 0"
    grep -q 'canceling statement due to user request' "$work/cancel32.out" ||
        fail "the 3.2 cancel did not cancel the query: $(cat "$work/cancel32.out")"
    [ "$(tcp_lines)" = "$before" ] || fail "the 3.2 CancelRequest was taken for a TCP session: $(grep 'connection on TCP' "$log" | tail -1)"
    echo "ok: with protocol 3.2 (a 32-byte cancel key) Ctrl-C cancels, and the cancel is no session to pg_rdma"
fi

# 4. libpq 17's cancel API (PQcancelCreate/Start/Poll, PQcancelBlocking).
rc=0
out=$(client "$cancel_api" "dbname=postgres with_rsocket=require" 2>&1) || rc=$?
if [ "$major" -ge 17 ]; then
    [ "$rc" = 0 ] || fail "libpq's cancel API (exit $rc): $out"
    echo "$out"
else
    [ "$rc" = 77 ] || fail "cancel_api built against libpq $major should report 77, not $rc: $out"
    echo "ok: (libpq $major has no PQcancelCreate: step not applicable)"
fi

# 5. pg_terminate_backend: psql gets the FATAL over RDMA.
rpsql "" -c 'select pg_sleep(62)' >"$work/term.out" 2>&1 &
job=$!
wait_for 30 has_sleeper 62 || fail "the session to terminate did not start"
pg_cluster_psql -c "select pg_terminate_backend($(sleeper_pid 62))" >/dev/null
wait "$job" && fail "the terminated psql exited 0"
grep -q 'terminating connection due to administrator command' "$work/term.out" ||
    fail "psql did not get the FATAL: $(cat "$work/term.out")"
echo "ok: pg_terminate_backend's message reaches psql over RDMA"

postmaster_unchanged
! grep -q 'was terminated by signal' "$log" || fail "a server process crashed"
echo "ok: the postmaster lived through it all; no server process crashed"
