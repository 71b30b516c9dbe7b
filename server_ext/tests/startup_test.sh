#!/usr/bin/env bash
# Starts real PostgreSQL 15 servers with the built pg_rdma (staged, see
# stage.sh) and checks what happens at startup: a bad combination of
# settings and a malformed pg_rdma.listen_addresses stop the server with a
# clear message; a good pg_rdma.listen_addresses is served over TCP (plain
# and declined sessions logged); without shared_preload_libraries, LOAD 'pg_rdma' fails clearly.
# Usage: startup_test.sh BUILT_PG_RDMA_SO SERVER_EXT_SOURCE_DIR PG_WIRE_PROBE
set -euo pipefail
so=$1 src=$2 probe=$3
here=$(dirname "$(readlink -f "$0")")
. "$here/stage.sh"

PORT=54337
work=$(mktemp -d /tmp/pg_rdma-startup.XXXXXX)
data=$work/data
stop() { as_pg "$STAGE_BIN/pg_ctl" -D "$data" -m immediate stop >/dev/null 2>&1 || true; }
trap 'stop; rm -rf "$work"' EXIT
stage_install "$work" "$so" "$src"
as_pg "$STAGE_BIN/initdb" -D "$data" -A trust -U postgres --no-locale >/dev/null
as_pg cp "$data/postgresql.conf" "$work/postgresql.conf.orig"

fail() { echo "FAIL: $*"; cat "$data/log" 2>/dev/null; exit 1; }

# configure LINE...: postgresql.conf = initdb's + the pg_rdma lines given.
configure() {
    as_pg cp "$work/postgresql.conf.orig" "$data/postgresql.conf"
    printf '%s\n' "port = $PORT" "unix_socket_directories = '$work'" "listen_addresses = ''" "$@" |
        as_pg tee -a "$data/postgresql.conf" >/dev/null
    as_pg rm -f "$data/log"
}
start() { as_pg "$STAGE_BIN/pg_ctl" -D "$data" -l "$data/log" -w -t 30 start >/dev/null 2>&1; }
sql() { as_pg "$STAGE_BIN/psql" -X -h "$work" -p "$PORT" -U postgres -d postgres -At "$@"; }
# eventually CMD...: CMD succeeds within 10 s (tried every 0.1 s).
eventually() {
    for _ in $(seq 100); do
        "$@" && return 0
        sleep 0.1
    done
    return 1
}
# in_log PATTERN: the server log has PATTERN within 10 s. A backend logs its
# disconnection after the client has already gone, so a check made right
# after psql exits can come too early.
in_log() { eventually grep -q "$1" "$data/log"; }

# 1. keepalive_timeout < 2 x keepalive_interval: the postmaster stops.
configure "shared_preload_libraries = 'pg_rdma'" "pg_rdma.keepalive_interval = '5s'" "pg_rdma.keepalive_timeout = '8s'"
start && fail "the server started with keepalive_timeout < 2 x keepalive_interval"
grep -q 'FATAL:  pg_rdma: invalid configuration: keepalive_timeout must be at least twice keepalive_interval' \
    "$data/log" || fail "no clear message for the bad keepalive combination"
echo "ok: a bad settings combination stops the server"

# 1b. connect_timeout over half of authentication_timeout: a session whose
#     RDMA setup failed would have no time left to authenticate on TCP.
configure "shared_preload_libraries = 'pg_rdma'" "pg_rdma.connect_timeout = '31s'" "authentication_timeout = '1min'"
start && fail "the server started with connect_timeout over half of authentication_timeout"
grep -q "FATAL:  pg_rdma: invalid configuration: connect_timeout (31000 ms) must be at most half of PostgreSQL's authentication_timeout (60 s)" \
    "$data/log" || fail "no clear message for connect_timeout against authentication_timeout"
echo "ok: connect_timeout over half of authentication_timeout stops the server"

# 1c. max_unauthenticated_memory below what one session pins: no session
#     could use RDMA, so the server says so instead of declining them all.
configure "shared_preload_libraries = 'pg_rdma'" "pg_rdma.rx_buffer_size = '64MB'" \
    "pg_rdma.max_unauthenticated_memory = '32MB'"
start && fail "the server started with max_unauthenticated_memory below one session's pinned memory"
grep -q 'FATAL:  pg_rdma: invalid configuration: max_unauthenticated_memory (32768 kB) is less than one session pins' \
    "$data/log" || fail "no clear message for max_unauthenticated_memory below one session"
echo "ok: max_unauthenticated_memory below one session stops the server"

# 2. A malformed pg_rdma.listen_addresses: the postmaster stops.
configure "shared_preload_libraries = 'pg_rdma'" "pg_rdma.listen_addresses = '127.0.0.1,,10.0.0.5'"
start && fail "the server started with a malformed pg_rdma.listen_addresses"
grep -q 'invalid value for parameter "pg_rdma.listen_addresses": the list has an empty item' "$data/log" ||
    fail "no clear message for the malformed list"
echo "ok: a malformed pg_rdma.listen_addresses stops the server"

# 3. pg_rdma.listen_addresses is served over TCP too, and the session hooks
#    are installed without a WARNING. Plain clients stay on TCP (logged as
#    with_rsocket=false); a client asking for RDMA on a machine without an
#    RDMA device is declined with the reason and continues on TCP.
configure "shared_preload_libraries = 'pg_rdma'" "pg_rdma.listen_addresses = ' 127.0.0.1 '" \
    "log_connections = on" "log_disconnections = on" "authentication_timeout = '1s'" \
    "pg_rdma.connect_timeout = '500ms'"
start || fail "the server did not start with a valid pg_rdma.listen_addresses"
[ "$(sql -c 'show listen_addresses')" = 127.0.0.1 ] || fail "listen_addresses does not include the RDMA address"
[ "$(as_pg "$STAGE_BIN/psql" -X -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -At -c 'select 42')" = 42 ] ||
    fail "no TCP service on the pg_rdma address"
grep -q 'WARNING:  pg_rdma' "$data/log" && fail "unexpected pg_rdma WARNING at startup"
grep -q 'LOG:  pg_rdma: connection on TCP: with_rsocket=false host=127.0.0.1 port=' "$data/log" ||
    fail "no with_rsocket=false line for a plain TCP session on a pg_rdma address"
in_log 'LOG:  pg_rdma: disconnection: with_rsocket=false session time: ' ||
    fail "no pg_rdma disconnection line"
out=$("$probe" 127.0.0.1 "$PORT" postgres postgres --prefer 'select 7' 2>&1) ||
    fail "a client asking for RDMA without a device did not continue on TCP: $out"
grep -qx 7 <<<"$out" || fail "the query of a client preferring RDMA did not run: $out"
# Our client does not even ask without a device; ask by hand, as a client
# on a machine with one would: the server has none, so it answers 'N'.
# Three in a row: with the probe's, four declines within a few seconds.
reply=$(python3 - "$PORT" <<'PY'
import socket, struct, sys
for _ in range(3):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
    s.sendall(struct.pack("!II", 8, 0x52444D41))
    print(s.recv(1).decode(), end="")
    s.close()
print()
PY
) || fail "the raw upgrade request got no answer"
[ "$reply" = NNN ] || fail "expected the decline 'N' from a server without an RDMA device, got '$reply'"
# Rate-limited: one line per 10 s for the four declines (two if they
# straddle a window), with the reason in its DETAIL and what to do in its
# HINT.
in_log 'LOG:  pg_rdma: RDMA not possible for host=127.0.0.1 port=[0-9]*; the session continues on TCP' ||
    fail "the server did not log that RDMA was not possible"
in_log 'DETAIL:  .*device' || fail "the decline's DETAIL does not give the reason"
in_log 'HINT:  List in pg_rdma.listen_addresses only addresses on an RDMA port' || fail "the decline has no HINT"
[ "$(grep -c 'pg_rdma: RDMA not possible for host=127.0.0.1' "$data/log")" -le 2 ] ||
    fail "four declines within seconds logged $(grep -c 'pg_rdma: RDMA not possible' "$data/log") lines"
# Unix-socket sessions are not pg_rdma's: no line for them.
# A backend that never gets its startup packet ends with _exit(1) at
# authentication_timeout, running no exit callback: its pg_stat_rdma row
# must not outlive it.
sql -c 'create extension pg_rdma' >/dev/null
python3 - "$PORT" <<'PY'
import socket, struct, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
s.sendall(struct.pack("!II", 8, 80877103))  # SSLRequest: the session is decided
assert s.recv(1) == b"N"
time.sleep(3)  # silent past authentication_timeout
PY
[ "$(sql -c 'select count(*) from pg_stat_rdma')" = 0 ] ||
    fail "a backend that died at authentication_timeout left its pg_stat_rdma row: $(sql -c 'table pg_stat_rdma')"
lines_before=$(grep -c 'pg_rdma: ' "$data/log")
sql -c 'select 1' >/dev/null
[ "$(grep -c 'pg_rdma: ' "$data/log")" = "$lines_before" ] || fail "a Unix-socket session was logged as pg_rdma's"
# A CancelRequest on a pg_rdma address is not a session: no line of ours.
python3 - "$PORT" <<'PY'
import socket, struct, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
s.sendall(struct.pack("!IIII", 16, 80877102, 1, 2))  # pid 1, key 2: cancels nothing
assert s.recv(1) == b""  # the server closes without an answer
PY
sleep 0.5
[ "$(grep -c 'pg_rdma: ' "$data/log")" = "$lines_before" ] ||
    fail "a CancelRequest was logged as a pg_rdma session: $(grep 'pg_rdma: ' "$data/log" | tail -2)"
# A connection closed without a byte (a load balancer's TCP health check)
# is not a session either: not counted, no line of ours.
not_requested() { sql -c "select sessions from pg_stat_rdma_outcomes where outcome = 'not_requested'"; }
counted_before=$(not_requested)
python3 - "$PORT" <<'PY'
import socket, sys
socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20).close()
PY
sleep 0.5
[ "$(not_requested)" = "$counted_before" ] ||
    fail "an empty connection was counted as a session: not_requested went from $counted_before to $(not_requested)"
[ "$(grep -c 'pg_rdma: ' "$data/log")" = "$lines_before" ] ||
    fail "an empty connection was logged as a pg_rdma session: $(grep 'pg_rdma: ' "$data/log" | tail -2)"
echo "ok: pg_rdma.listen_addresses serves TCP; plain and declined sessions stay on TCP and are logged"

# A backend the postmaster starts only to refuse the session (here: a smart
# shutdown waits for a live session) declines the upgrade; PostgreSQL's
# refusal follows on TCP.
sql -c 'select pg_sleep(8)' >/dev/null &
holder=$!
holding() { [ "$(sql -c "select count(*) from pg_stat_activity where query = 'select pg_sleep(8)'")" = 1 ]; }
eventually holding || fail "the session that should hold off the smart shutdown never ran its query"
as_pg "$STAGE_BIN/pg_ctl" -D "$data" -m smart -W stop >/dev/null
in_log 'received smart shutdown request' || fail "the server did not take the smart shutdown request"
out=$(python3 - "$PORT" <<'PY'
import socket, struct, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
s.sendall(struct.pack("!II", 8, 0x52444D41))  # our upgrade request
print(s.recv(1).decode())
params = b"user\0postgres\0database\0postgres\0\0"
body = struct.pack("!I", 196608) + params  # protocol 3.0 startup packet
s.sendall(struct.pack("!I", len(body) + 4) + body)
print(s.recv(4096)[5:].decode(errors="replace"))
PY
) || fail "no answer to an upgrade request during a smart shutdown"
wait "$holder" || true
[ "$(head -1 <<<"$out")" = N ] || fail "the upgrade during shutdown was not declined: $out"
grep -q 'the database system is shutting down' <<<"$out" || fail "PostgreSQL's refusal did not follow on TCP: $out"
grep -q 'LOG:  pg_rdma: declined an RDMA upgrade from host=127.0.0.1 port=[0-9]*: the server is not accepting this session' \
    "$data/log" || fail "the server did not log why it declined during shutdown"
stop
echo "ok: a backend started only to refuse the session declines the upgrade; the refusal follows on TCP"

# 4. Without shared_preload_libraries, loading the module is refused.
configure
start || fail "the server did not start without pg_rdma"
out=$(sql -c "LOAD 'pg_rdma'" 2>&1) && fail "LOAD 'pg_rdma' succeeded without shared_preload_libraries"
grep -q 'pg_rdma can only be loaded through shared_preload_libraries' <<<"$out" ||
    fail "LOAD 'pg_rdma' did not say why: $out"
stop
echo "ok: LOAD 'pg_rdma' without shared_preload_libraries fails clearly"
