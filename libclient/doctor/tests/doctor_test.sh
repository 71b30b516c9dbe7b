#!/usr/bin/env bash
# `pgrdma doctor` in the Soft-RoCE guest, each verdict caused for real:
#   works               a PostgreSQL 15 with the built pg_rdma on the rxe address
#                       (host:port, a conninfo string, a URI, PGHOST/PGPORT)
#   server_not_offered  an address PostgreSQL listens on, not in pg_rdma.listen_addresses
#   server_no_device    127.0.0.1, listed in pg_rdma.listen_addresses, no device behind it
#   server_hba_rejects  a pg_hba.conf whose first lines reject the client's address
#   server_memlock      the postmaster's memlock limit lowered with prlimit
#   memlock             the doctor under `ulimit -l 64` (this host's limit)
#   server_over_cap     the server restarted with pg_rdma.max_unauthenticated_sessions = 0
#   no_pg_rdma          a second server without pg_rdma in shared_preload_libraries
#   not_postgresql      a listener that closes at once
#   no_answer           a listener that never answers
#   no_server           a port nothing listens on
# A client that sends bytes after its probe request gets no session: they
# never reach PostgreSQL.
# And the server's side: each probe that reached pg_rdma is counted once as
# `probe` in pg_stat_rdma_outcomes (no other outcome moves), gets no
# pg_stat_rdma row, leaves no backend behind, and PostgreSQL logs nothing
# about it but log_connections' lines (no "incomplete startup packet", no
# FATAL). (The firewall verdict needs a link: the two-host test
# client_roce_blocked_fallback causes it.)
# `pgrdma doctor --server` (pg_rdma_check_server()): the rxe address is ok
# on rxe0, 127.0.0.1 a problem (no device), exit 3; with the cap at 0 the
# caps are a problem too.
# Usage: doctor_test.sh PGRDMA BUILD_DIR
set -euo pipefail
pgrdma=$1 build=$2
IP=${RXE_IP:?run in the Soft-RoCE guest}
here=$(dirname "$(readlink -f "$0")")
# shellcheck source=regress/pg/cluster.sh
. "$here/../../../regress/pg/cluster.sh"
# shellcheck source=regress/pg/client_checks.sh
. "$here/../../../regress/pg/client_checks.sh"

readonly PORT=54491 PLAIN_PORT=54492 NOTHING_PORT=54999 CLOSING_PORT=54493 SILENT_PORT=54494
readonly DOCTOR_LIMIT_S=60
# A second address on the rxe network device: PostgreSQL listens there,
# pg_rdma does not.
netdev=$(ip -o -4 addr show | awk -v ip="$IP" 'index($4, ip "/") == 1 { print $2; exit }')
[ -n "$netdev" ] || { echo "FAIL: no network device holds $IP"; exit 1; }
OTHER_IP=${IP%.*}.$(( (${IP##*.} + 100) % 250 + 1 ))
ip addr add "$OTHER_IP/32" dev "$netdev"
trap 'ip addr del "$OTHER_IP/32" dev "$netdev" 2>/dev/null; pg_cluster_cleanup' EXIT

PG_CLUSTER_PORT=$PORT
pg_cluster_up_for_clients doctor "$build" "listen_addresses = '$OTHER_IP'" "log_connections = on"
main_work=$PG_CLUSTER_WORK
log=$(pg_cluster_log)
work=$(mktemp -d /tmp/pg_rdma-doctor-out.XXXXXX)

fail() {
    echo "FAIL: $*"
    [ ! -s "$work/doctor" ] || { echo "--- doctor's output:"; cat "$work/doctor"; }
    echo "--- server log:"; tail -20 "$log"
    exit 1
}

# doctor LABEL EXIT CAUSE TEXT [ARG...]: pgrdma doctor ARGs ends with EXIT,
# names CAUSE, and its verdict holds TEXT (a fixed string).
doctor() {
    local label=$1 want_exit=$2 want_cause=$3 want_text=$4 rc=0
    shift 4
    timeout -k 5 "$DOCTOR_LIMIT_S" "$pgrdma" doctor "$@" >"$work/doctor" 2>&1 || rc=$?
    [ "$rc" = "$want_exit" ] || fail "$label: pgrdma doctor $* exited $rc, expected $want_exit"
    grep -qx "cause: *$want_cause (exit $want_exit)" "$work/doctor" || fail "$label: the cause is not $want_cause"
    grep '^verdict:' "$work/doctor" | grep -qF -- "$want_text" || fail "$label: the verdict lacks \"$want_text\""
    grep -q '^fix:' "$work/doctor" || [ "$want_exit" = 0 ] || fail "$label: no fix is given"
    echo "ok: $label: $(sed -n 's/^verdict: *//p' "$work/doctor")"
}

answered() { grep -c 'pg_rdma: answered an RDMA probe' "$log" || true; }
probe_count() { pg_cluster_psql -c "select sessions from pg_stat_rdma_outcomes where outcome = 'probe'"; }

pg_cluster_psql -c 'select pg_stat_reset_rdma()' >/dev/null
log_start=$(wc -c <"$log")

# ---- works, in each form a DBA writes a server in
doctor "works (host:port)" 0 works "RDMA works to $IP:$PORT via rxe0 (RoCE v2, MTU " "$IP:$PORT"
grep -q '^route: *via rxe0 port 1 from '"$IP"', GID type RoCE v2$' "$work/doctor" || fail "works: the route line is wrong"
grep -q '^probe: *RDMA set up in .* ms on rxe0; 32 round trips of 64 bytes, median .* us; 64 KiB echoed$' "$work/doctor" ||
    fail "works: the probe line is wrong"
cat "$work/doctor"
doctor "works (conninfo)" 0 works "RDMA works to $IP:$PORT" "host=$IP port=$PORT dbname=postgres with_rsocket=require"
doctor "works (URI)" 0 works "RDMA works to $IP:$PORT" "postgresql://postgres@$IP:$PORT/postgres?with_rsocket=true"
PGHOST=$IP PGPORT=$PORT doctor "works (PGHOST, PGPORT)" 0 works "RDMA works to $IP:$PORT"

# ---- the server declines, and says why
doctor "server_not_offered" 3 server_not_offered "the server declined (not_offered): this address is not in pg_rdma.listen_addresses" "$OTHER_IP:$PORT"
grep -q 'pg_rdma.listen_addresses' <(sed -n 's/^fix: *//p' "$work/doctor") || fail "not_offered: the fix does not name the setting"
doctor "server_no_device" 3 server_no_device "the server declined (no_device): " "127.0.0.1:$PORT"

# hba_rejects: first lines rejecting every connection from the doctor's
# address ($IP itself), ordinary and replication.
cp "$PG_CLUSTER_DATA/pg_hba.conf" "$work/pg_hba.conf.orig"
{ echo "host all all $IP/32 reject"; echo "host replication all $IP/32 reject"; cat "$work/pg_hba.conf.orig"; } | _pg_cluster_write "$PG_CLUSTER_DATA/pg_hba.conf"
pg_cluster_psql -c 'select pg_reload_conf()' >/dev/null
tries=0  # probes sent while waiting for the reloads
rejected() { tries=$((tries + 1)); timeout -k 5 "$DOCTOR_LIMIT_S" "$pgrdma" doctor --quiet "$IP:$PORT" >"$work/doctor" 2>&1; [ $? = 3 ]; }
wait_for 30 rejected || fail "hba_rejects: the doctor never saw the reloaded pg_hba.conf"
doctor "server_hba_rejects" 3 server_hba_rejects "the server declined (hba_rejects): no line of pg_hba.conf admits this address" "$IP:$PORT"
# Which line rejects is the server log's to say, not a stranger's to read.
grep -q 'rejected by line' "$work/doctor" && fail "hba_rejects: the client was told the pg_hba.conf line"
grep -q 'answered an RDMA probe .*no RDMA (hba_rejects): no line of pg_hba.conf admits this address (rejected by line 2)' "$log" ||
    fail "hba_rejects: the server log does not name the line"
_pg_cluster_write "$PG_CLUSTER_DATA/pg_hba.conf" <"$work/pg_hba.conf.orig"
pg_cluster_psql -c 'select pg_reload_conf()' >/dev/null
works_again() { tries=$((tries + 1)); timeout -k 5 "$DOCTOR_LIMIT_S" "$pgrdma" doctor --quiet "$IP:$PORT" >"$work/doctor" 2>&1; }
wait_for 30 works_again || fail "after pg_hba.conf was put back the doctor does not say it works"

# ---- the server's memlock limit (every new backend inherits the postmaster's)
postmaster=$(head -1 "$PG_CLUSTER_DATA/postmaster.pid")
prlimit --pid "$postmaster" --memlock=262144:262144
doctor "server_memlock" 3 server_memlock "the server declined (memlock): RLIMIT_MEMLOCK is 256 KiB" "$IP:$PORT"
prlimit --pid "$postmaster" --memlock=unlimited:unlimited

# ---- a client that pipelines bytes after its probe request: they never
# reach PostgreSQL (no "invalid length of startup packet", no session)
python3 - "$IP" "$PORT" <<'PY'
import socket, struct, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=20)
params = b"user\0postgres\0database\0postgres\0\0"
startup = struct.pack("!II", len(params) + 8, 196608) + params
s.sendall(struct.pack("!II", 8, 0x52444D50) + startup + b"garbage")
tag = s.recv(1)
assert tag in (b"R", b"D"), tag
s.close()
PY
tries=$((tries + 1))  # one more probe answered

# ---- this host: memlock (nothing is asked of the server)
before=$(answered)
# (ulimit in a subshell: the limit is the doctor's alone)
( ulimit -l 64; doctor "memlock (this host)" 1 memlock "this host's memlock limit (64 KiB) is below what a session needs" "$IP:$PORT" )
sleep 1
[ "$(answered)" = "$before" ] || fail "memlock: the server answered a probe the doctor should not have sent"

# ---- the server's side of all that
# Four that worked, not_offered, no_device, hba_rejects, memlock, and the
# waits and the pipelining client.
probes=$(answered)
[ "$probes" = $((8 + tries)) ] || fail "the server logged $probes answered probes, expected $((8 + tries))"
[ "$(probe_count)" = "$probes" ] ||
    fail "pg_stat_rdma_outcomes counts $(probe_count) probes, the log $probes"
others=$(pg_cluster_psql -c "select coalesce(sum(sessions), 0) from pg_stat_rdma_outcomes where outcome <> 'probe'")
[ "$others" = 0 ] || fail "probes moved other outcomes: $(pg_cluster_psql -c "select outcome, sessions from pg_stat_rdma_outcomes where sessions > 0")"
rows=$(pg_cluster_psql -c 'select count(*) from pg_stat_rdma where pid <> pg_backend_pid()')
[ "$rows" = 0 ] || fail "probes left $rows pg_stat_rdma row(s)"
leftover() { [ "$(pg_cluster_psql -c "select count(*) from pg_stat_activity where backend_type = 'client backend' and pid <> pg_backend_pid()")" = 0 ]; }
wait_for 30 leftover || fail "probes left backends behind"
tail -c +"$((log_start + 1))" "$log" >"$work/log"
if grep -E 'FATAL|ERROR|incomplete startup packet|invalid length|unsupported frontend|could not (receive|send)|unexpected EOF|connection authorized: .*host=' "$work/log"; then
    fail "the probes made PostgreSQL log the lines above"
fi
echo "ok: $probes probes answered: counted once each as 'probe', no row, no backend left, nothing in the log but:"
grep -o 'pg_rdma: answered an RDMA probe.*' "$work/log" | sed 's/host=[^ ]* port=[0-9]*/host=H port=P/' | sort | uniq -c

# ---- the server's own check
server_check() {
    local rc=0
    as_pg "$pgrdma" doctor --server "host=$main_work port=$PORT user=postgres dbname=postgres" >"$work/doctor" 2>&1 || rc=$?
    cat "$work/doctor"
    [ "$rc" = 3 ] || fail "doctor --server exited $rc, expected 3"
    grep -qx "ok  *listen_address  *$IP: rxe0 port 1, RoCE, MTU [0-9]*, active" "$work/doctor" ||
        fail "doctor --server: no ok line for $IP on rxe0"
    grep -q "^problem  *listen_address  *127.0.0.1: rdma_bind_addr(127.0.0.1:0): the address is not on an RDMA device" "$work/doctor" ||
        fail "doctor --server: no problem line for 127.0.0.1"
    grep -qx "cause: *server_problem (exit 3)" "$work/doctor" || fail "doctor --server: the cause is not server_problem"
}
server_check
grep -q '^ok  *setup_caps' "$work/doctor" || fail "doctor --server: the caps are not ok"
echo "ok: doctor --server: $IP ok on rxe0, 127.0.0.1 a problem"

# ---- no server, something else than PostgreSQL, no pg_rdma
doctor "no_server" 6 no_server "Connection refused" "$IP:$NOTHING_PORT"
python3 - "$IP" "$CLOSING_PORT" "$SILENT_PORT" <<'PY' &
import socket, sys, threading, time
def serve(port, close):
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((sys.argv[1], port)); l.listen()
    held = []
    while True:
        c, _ = l.accept()
        if close: c.close()
        else: held.append(c)
threading.Thread(target=serve, args=(int(sys.argv[2]), True), daemon=True).start()
threading.Thread(target=serve, args=(int(sys.argv[3]), False), daemon=True).start()
time.sleep(120)
PY
listeners=$!
listening() { python3 -c "import socket,sys; socket.create_connection(('$IP', $SILENT_PORT), timeout=2).close()"; }
wait_for 20 listening || fail "the test's own listeners did not start"
doctor "not_postgresql" 5 not_postgresql "what listens there is not a PostgreSQL server" "$IP:$CLOSING_PORT"
doctor "no_answer" 3 no_answer "did not answer" --timeout 3 "$IP:$SILENT_PORT"
kill "$listeners" 2>/dev/null || true
PG_CLUSTER_PORT=$PLAIN_PORT
pg_cluster_init "$(mktemp -d /tmp/pg_rdma-doctor-plain.XXXXXX)" "$build" \
    "shared_preload_libraries = ''" "listen_addresses = '$IP'"
pg_cluster_start
doctor "no_pg_rdma" 5 no_pg_rdma "the server answers without pg_rdma" "$IP:$PLAIN_PORT"
pg_cluster_stop
pg_cluster_use "$main_work"

# ---- over the server's cap
echo "pg_rdma.max_unauthenticated_sessions = 0" | _pg_cluster_append "$PG_CLUSTER_DATA/postgresql.conf"
pg_cluster_restart
doctor "server_over_cap" 3 server_over_cap "the server declined (over_cap): " "$IP:$PORT"
server_check
grep -q '^problem  *setup_caps  *server: 0 session(s) may be in RDMA setup' "$work/doctor" ||
    fail "doctor --server: a cap of 0 is not a problem"
echo "ok: doctor --server: a cap of 0 sessions is a problem"
echo "all doctor verdicts checked"
