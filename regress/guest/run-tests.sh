#!/bin/bash
# run-tests.sh PLAN OUT_DIR — runs the RDMA suite inside the guest.
#
# regress/run-rdma-suite writes PLAN on the host (regress/lib/suite_results.py
# over `meson introspect --tests`: one `run_test` line per test of suite
# 'rdma') and starts this script through regress/rxe-guest. Starting meson itself in the guest costs
# ~13 s of Python imports over 9p under TCG; running the test binaries
# directly costs well under a second each.
#
# Results go to OUT_DIR for the host to check:
#   results.tsv   NAME<TAB>STATUS<TAB>EXIT<TAB>SECONDS, one line per test
#   NAME.log      the test's stdout and stderr
#   done          the number of tests run, written last
# Exit status: 0 when every test passed, 1 otherwise.

set -u
PLAN=$1
OUT=$2
readonly EXIT_SKIP=77      # meson's "skipped" code: a failure here (see below)
readonly EXIT_TIMEOUT=124  # from timeout(1)
readonly KILL_GRACE_S=5
ran=0 failed=0

log_name() { echo "$OUT/${1//[^A-Za-z0-9_.-]/_}.log"; }

# Every test in this suite needs the device the guest has, so a skip means
# something is wrong (no device, wrong env) and must not pass silently.
classify() {
  case $1 in
    0) echo OK ;;
    "$EXIT_TIMEOUT") echo TIMEOUT ;;
    "$EXIT_SKIP") echo SKIPPED-AS-FAIL ;;
    *) echo FAIL ;;
  esac
}

# run_test NAME TIMEOUT_S WORKDIR CMD... (CMD is usually `env K=V... prog`)
run_test() {
  local name=$1 limit=$2 dir=$3 log start rc status secs
  shift 3
  log=$(log_name "$name")
  start=$EPOCHREALTIME
  (cd "$dir" && exec timeout -k "$KILL_GRACE_S" "$limit" "$@") </dev/null >"$log" 2>&1
  rc=$?
  secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
  status=$(classify "$rc")
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$rc" "$secs" >>"$OUT/results.tsv"
  ran=$((ran + 1))
  if [ "$status" = OK ]; then
    printf '%-8s %s (%ss): %s\n' "$status" "$name" "$secs" "$(tail -n 1 "$log")"
  else
    failed=$((failed + 1))
    printf '%-8s %s (%ss, exit %s); output:\n' "$status" "$name" "$secs" "$rc"
    sed 's/^/    /' "$log"
  fi
}

: >"$OUT/results.tsv"
# shellcheck source=/dev/null
. "$PLAN"
echo "$ran" >"$OUT/done"
[ "$failed" = 0 ]
