#!/usr/bin/env bash
# The part of scripts/demo that runs inside the Soft-RoCE guest.
set -euo pipefail
build=$1
bench=$build/perf/transport_bench
port=18611

echo "== 1. the RDMA device"
ibv_devinfo -d "$RXE_DEV" | grep -E 'hca_id|transport|state|active_mtu|link_layer'

echo
echo "== 2. verbs smoke: RDMA WRITE WITH IMM between two queue pairs on $RXE_DEV"
"$build/regress/write_imm_loopback"

echo
echo "== 3. two processes over the pg_rdma transport on $RXE_IP"
log=$(mktemp)
"$bench" server --addr "$RXE_IP" --port "$port" >"$log" 2>&1 &
server=$!
for _ in $(seq 100); do grep -q listening "$log" && break; sleep 0.1; done
"$bench" client --addr "$RXE_IP" --port "$port" --mode latency --sizes 64,4K --iters 2000
wait "$server"
"$bench" server --addr "$RXE_IP" --port "$port" >"$log" 2>&1 &
server=$!
for _ in $(seq 100); do grep -q listening "$log" && break; sleep 0.1; done
"$bench" client --addr "$RXE_IP" --port "$port" --mode bandwidth --sizes 64K --seconds 2
wait "$server"
echo
echo "== 4. PostgreSQL 15 with pg_rdma preloaded on $RXE_IP: psql over RDMA"
"$(dirname "$(readlink -f "$0")")/demo-pg-in-guest.sh" "$build"
echo
echo "pg_rdma demo: RDMA works here. (Emulated CPU: compare figures only as ratios, see scripts/bench.)"
