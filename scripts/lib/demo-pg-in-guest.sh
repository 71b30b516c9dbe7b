#!/usr/bin/env bash
# Step of scripts/demo inside the guest: a real PostgreSQL 15 server with the
# installed package's pg_rdma preloaded, configured by conf/
# (regress/pg/cluster.sh), and a psql session to it over RDMA through the
# installed package's `pgrdma` wrapper, with
# pg_stat_rdma and the server's log line proving it. Then the same psql
# without with_rsocket, on TCP, for comparison. Usage: demo-pg-in-guest.sh BUILD
set -euo pipefail
# shellcheck source=regress/pg/cluster.sh
. "$(dirname "$(readlink -f "$0")")/../../regress/pg/cluster.sh"
PG_CLUSTER_PORT=54390
# What the packages installed (scripts/demo installs them before the guest
# boots; the guest's root is the host's).
PG_CLUSTER_SO=$PG_PKGLIBDIR/pg_rdma.so
PG_CLUSTER_CLIENT_LIBRARY=/usr/lib/x86_64-linux-gnu/pg_rdma/libpq_rdma.so
pgrdma=/usr/bin/pgrdma
for f in "$PG_CLUSTER_SO" "$PG_CLUSTER_CLIENT_LIBRARY" "$pgrdma"; do
    [ -f "$f" ] || { echo "pg_rdma demo: $f is missing: are the packages installed?" >&2; exit 1; }
done
pg_cluster_init "$(mktemp -d /tmp/pg_rdma-demo.XXXXXX)" "$1"
pg_cluster_start
pg_cluster_set_password demo demo
# (Every role sees its own sessions' rows: demo needs no grant.)
pg_cluster_psql -c 'create extension pg_rdma' >/dev/null
query="select pid, client_addr, transport, device, protocol_version, bytes_sent, bytes_received
         from pg_stat_rdma where pid = pg_backend_pid()"
echo "\$ pgrdma psql \"host=$RXE_IP user=demo with_rsocket=true\" -c \"select ... from pg_stat_rdma ...\""
PGUSER=demo pg_cluster_client "$pgrdma" psql -X -P footer=off \
    -d "host=$RXE_IP dbname=postgres with_rsocket=true" -c "$query"
echo "\$ psql \"host=$RXE_IP user=demo\" (no with_rsocket: plain TCP, same address)"
PGUSER=demo pg_cluster_client psql -X -P footer=off -d "host=$RXE_IP dbname=postgres" \
    -c "select pid, transport from pg_stat_rdma where pid = pg_backend_pid()"
echo "\$ psql -c \"select outcome, sessions from pg_stat_rdma_outcomes where sessions > 0\" (counters that outlive sessions)"
PGUSER=demo pg_cluster_client psql -X -P footer=off -d "host=$RXE_IP dbname=postgres" \
    -c "select outcome, sessions from pg_stat_rdma_outcomes where sessions > 0"
sleep 0.3
echo "server log, pg_rdma's lines:"
grep -E 'pg_rdma:' "$(pg_cluster_log)" | sed -E 's/^[0-9-]+ [0-9:.]+ UTC \[[0-9]+\] /  /'
grep -q 'pg_rdma: connection upgraded: with_rsocket=true' "$(pg_cluster_log)" || {
    echo "pg_rdma demo: the session was NOT upgraded to RDMA" >&2
    exit 1
}
pg_cluster_stop
