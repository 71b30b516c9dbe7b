#!/bin/bash
# run-pair-tests.sh PLAN OUT_DIR — runs the two-host suite 'rdma-pair' on
# ONE of the two guests; regress/run-pair-suite starts it on both (host A
# through regress/rxe-guest's CMD, host B through its -p PEER_CMD).
#
# Both guests run the same PLAN (written on the host by
# regress/lib/suite_results.py, one `run_test` line per test) in the same
# order. Each test runs on both at once, told its side by the environment:
#   PG_RDMA_PAIR_ROLE  server on host A (10.99.0.1), client on host B (10.99.0.2)
#   PG_RDMA_PAIR_DIR   a fresh directory for this test that both guests share
#                      (regress/lib/pair.sh: "ready" files and waits on them)
# besides what regress/rxe-guest gives (RXE_HOST, RXE_IP, RXE_PEER_IP, ...).
# When a side ends, this script writes HOST.exit (its status) in that
# directory, so the other side's waits end at once instead of at their limit,
# and flushes the guest's nftables ruleset: a test killed at its timeout
# (after TERM, KILL 5 s later, before its own cleanup ran) leaves no firewall
# rule to the next one; it also undoes any fault a fault test left
# (regress/lib/faults.sh: fault_restore_all: netem, the link, rxe0).
#
# Results go to OUT_DIR/HOST/ (A or B) for the host to merge:
#   results.tsv   NAME<TAB>STATUS<TAB>EXIT<TAB>SECONDS, one line per test
#   NAME.log      this side's stdout and stderr of the test
#   done          the number of tests run, written last
# Exit status: 0 when every test passed on this side, 1 otherwise.

set -u
PLAN=$1
OUT=$2/${RXE_HOST:?run by regress/run-pair-suite in a two-host guest}
readonly EXIT_SKIP=77      # meson's "skipped" code: a failure here, as in suite rdma
readonly EXIT_TIMEOUT=124  # from timeout(1)
readonly KILL_GRACE_S=5
ran=0 failed=0
role=server
[ "$RXE_HOST" = B ] && role=client

safe_name() { echo "${1//[^A-Za-z0-9_.-]/_}"; }

classify() {
  case $1 in
    0) echo OK ;;
    "$EXIT_TIMEOUT") echo TIMEOUT ;;
    "$EXIT_SKIP") echo SKIPPED-AS-FAIL ;;
    *) echo FAIL ;;
  esac
}

# run_test NAME TIMEOUT_S WORKDIR CMD... (CMD is usually `env K=V... prog`):
# runs this side of one test under timeout(1), records and prints its result.
run_test() {
  local name=$1 limit=$2 dir=$3 start rc secs status log pair
  shift 3
  log=$OUT/$(safe_name "$name").log
  pair=$RXE_PAIR_DIR/tests/$(safe_name "$name")
  mkdir -p "$pair"
  start=$EPOCHREALTIME
  (cd "$dir" && exec env PG_RDMA_PAIR_ROLE="$role" PG_RDMA_PAIR_DIR="$pair" \
    timeout -k "$KILL_GRACE_S" "$limit" "$@") </dev/null >"$log" 2>&1
  rc=$?
  echo "$rc" >"$pair/$RXE_HOST.exit.tmp" && mv "$pair/$RXE_HOST.exit.tmp" "$pair/$RXE_HOST.exit"
  command -v nft >/dev/null && timeout 20 nft flush ruleset 2>/dev/null
  # Nor a fault (regress/lib/faults.sh): netem, a link left down, rxe0 gone.
  # shellcheck source=regress/lib/faults.sh
  (. "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh" && fault_restore_all)
  secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
  status=$(classify "$rc")
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$rc" "$secs" >>"$OUT/results.tsv"
  ran=$((ran + 1))
  if [ "$status" = OK ]; then
    printf '%-8s %s, %s side (%ss): %s\n' "$status" "$name" "$role" "$secs" "$(tail -n 1 "$log")"
  else
    failed=$((failed + 1))
    printf '%-8s %s, %s side (%ss, exit %s); output:\n' "$status" "$name" "$role" "$secs" "$rc"
    sed 's/^/    /' "$log"
  fi
}

# This suite has no background tests: a test in 'rdma-pair-background' runs
# in turn like the others (both sides must reach it in the same order).
start_background() { run_test "$@"; }

mkdir -p "$OUT" && : >"$OUT/results.tsv"
# shellcheck source=/dev/null
. "$PLAN"
echo "$ran" >"$OUT/done"
[ "$failed" = 0 ]
