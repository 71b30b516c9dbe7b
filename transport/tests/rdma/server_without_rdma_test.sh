#!/usr/bin/env bash
# A real PostgreSQL 15 server without pg_rdma answers the RDMA upgrade
# request with an error; the client reconnects over TCP with prefer and
# fails with a clear message with require; the server is unharmed.
# Runs in the Soft-RoCE guest (as root; PostgreSQL itself runs as postgres).
set -euo pipefail
probe=$1
PGBIN=$(ls -d /usr/lib/postgresql/15/bin)
IP=${RXE_IP:?run in the Soft-RoCE guest}
PORT=54329
DATA=$(mktemp -d /tmp/pg-no-rdma.XXXXXX)
chown postgres "$DATA"
as_pg() { runuser -u postgres -- "$@"; }
cleanup() { as_pg "$PGBIN/pg_ctl" -D "$DATA" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$DATA"; }
trap cleanup EXIT

as_pg "$PGBIN/initdb" -D "$DATA" -A trust -U postgres >/dev/null
echo "host all all $IP/32 trust" >>"$DATA/pg_hba.conf"
as_pg "$PGBIN/pg_ctl" -D "$DATA" -l "$DATA/log" -w -o "-c listen_addresses=$IP -p $PORT -k $DATA" start >/dev/null

fail() { echo "FAIL: $*"; cat "$DATA/log"; exit 1; }

out=$("$probe" "$IP" "$PORT" prefer) && rc=0 || rc=$?
echo "prefer:  $out"
[ "$rc" = 2 ] || fail "prefer should ask the caller to reconnect over TCP (exit 2), got $rc"
grep -q "does not support RDMA sessions" <<<"$out" || fail "prefer: the message does not say what is wrong"

out=$("$probe" "$IP" "$PORT" require) && rc=0 || rc=$?
echo "require: $out"
[ "$rc" = 3 ] || fail "require should fail (exit 3), got $rc"
grep -q "shared_preload_libraries" <<<"$out" || fail "require: the message does not say what to do"

# The server saw the request as an unknown protocol and went on serving.
grep -q "unsupported frontend protocol" "$DATA/log" || fail "the server log does not show the request"
[ "$(as_pg psql -h "$IP" -p "$PORT" -At -c 'select 42')" = 42 ] || fail "the server does not answer over TCP"
echo "ok: a server without pg_rdma leads to each mode's outcome"
