#!/usr/bin/env bash
# Step of scripts/demo inside the guest: a real PostgreSQL 15 server with the
# built pg_rdma preloaded, configured by conf/ (regress/pg/cluster.sh), and a
# plain psql session to it over the rxe address. Usage: demo-pg-in-guest.sh BUILD
set -euo pipefail
# shellcheck source=regress/pg/cluster.sh
. "$(dirname "$(readlink -f "$0")")/../../regress/pg/cluster.sh"
PG_CLUSTER_PORT=54390
pg_cluster_init "$(mktemp -d /tmp/pg_rdma-demo.XXXXXX)" "$1"
pg_cluster_start
pg_cluster_set_password demo demo
pg_cluster_psql -c 'create extension pg_rdma' -c 'grant pg_read_all_stats to demo' >/dev/null
echo "server log, pg_rdma's lines:"
grep -E 'pg_rdma:|listen_addresses is now|listening on IPv4' "$(pg_cluster_log)" | sed -E 's/^[0-9-]+ [0-9:.]+ UTC \[[0-9]+\] /  /'
echo "psql -h $RXE_IP (scram-sha-256 per conf/pg_hba.pg_rdma.conf):"
PGUSER=demo pg_cluster_psql_tcp "" -P tuples_only=off -P format=aligned -P footer=off \
    -c "select current_user, inet_client_addr() as client, inet_server_addr() as server,
               (select count(*) from pg_stat_rdma) as rdma_sessions"
pg_cluster_stop
