#!/bin/bash
# run-tests.sh PLAN OUT_DIR — runs the RDMA suite inside the guest.
#
# regress/run-rdma-suite writes PLAN on the host (regress/lib/suite_results.py
# over `meson introspect --tests`: a function `second_lane` of the tests also
# in suite 'rdma-second-lane', one `start_background` line per test also in
# 'rdma-background', `start_second_lane`, one `run_test` line per other test
# of suite 'rdma' but those also in 'rdma-alone', `wait_second_lane`, then
# those) and starts this script through regress/rxe-guest. Starting meson itself in the guest costs
# ~13 s of Python imports over 9p under TCG; running the test binaries
# directly costs well under a second each.
#
# Background tests (long, mostly sleeping) start before the others and run
# beside them; their results are collected at the end, after the sequential
# tests, and reported exactly like theirs.
#
# Second lane: the plan's function `second_lane` runs its tests one after
# another beside the first lane's, from the start. One lane keeps about one
# of the guest's two vCPUs busy (a test mostly waits for its own processes
# in turn); two lanes use the host's second core, which otherwise idles.
# Each result is reported as it comes, one lane at a time (a lock). Tests
# that load the whole guest come after both lanes (`wait_second_lane`).
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
# Background tests' result lines wait here; the report lock lives here too:
# the guest's own tmpfs, not the 9p share OUT is on.
BG_DIR=$(mktemp -d)
readonly REPORT_LOCK=$BG_DIR/report.lock

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

# execute NAME TIMEOUT_S WORKDIR CMD... (CMD is usually `env K=V... prog`):
# runs the test under timeout(1), its output to NAME.log, and prints its
# results.tsv line.
execute() {
  local name=$1 limit=$2 dir=$3 start rc secs
  shift 3
  start=$EPOCHREALTIME
  (cd "$dir" && exec timeout -k "$KILL_GRACE_S" "$limit" "$@") </dev/null >"$(log_name "$name")" 2>&1
  rc=$?
  secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
  printf '%s\t%s\t%s\t%s\n' "$name" "$(classify "$rc")" "$rc" "$secs"
}

# report LINE: records one result line of execute and prints it to the
# console, under a lock so that the two lanes' lines never interleave.
report() {
  local name status rc secs log
  IFS=$'\t' read -r name status rc secs <<<"$1"
  log=$(log_name "$name")
  {
    flock 9
    printf '%s\n' "$1" >>"$OUT/results.tsv"
    if [ "$status" = OK ]; then
      printf '%-8s %s (%ss): %s\n' "$status" "$name" "$secs" "$(tail -n 1 "$log")"
    else
      printf '%-8s %s (%ss, exit %s); output:\n' "$status" "$name" "$secs" "$rc"
      sed 's/^/    /' "$log"
    fi
  } 9>>"$REPORT_LOCK"
}

# run_test NAME TIMEOUT_S WORKDIR CMD...: runs one test now.
run_test() {
  report "$(execute "$@")"
}

# start_background NAME TIMEOUT_S WORKDIR CMD...: starts one test beside the
# others; its result line waits in BG_DIR for collect_background.
bg_names=() bg_pids=()
start_background() {
  execute "$@" >"$BG_DIR/${#bg_names[@]}" &
  bg_pids+=($!)
  bg_names+=("$1")
  printf '%-8s %s (in the background, limit %ss)\n' START "$1" "$2"
}

# start_second_lane: runs the plan's function second_lane beside the rest;
# wait_second_lane: waits for it to end (the plan's tests that run alone
# come after).
lane2_pid=''
start_second_lane() {
  second_lane &
  lane2_pid=$!
}
wait_second_lane() {
  local rc
  [ -n "$lane2_pid" ] || return 0
  wait "$lane2_pid"
  rc=$?
  lane2_pid=''
  # second_lane ends with `:`: any other status means the lane itself died.
  [ "$rc" = 0 ] && return 0
  lost=$((lost + 1))
  printf '%-8s the second lane (exit %s): its tests after the last one reported have no result\n' NO-RESULT "$rc"
}

# Waits for every background test and reports it. One whose runner died
# before writing its line gets no results.tsv line, so run-rdma-suite's
# "planned == reported" check fails the run (as does a second lane that died
# before its last test).
collect_background() {
  local i
  for i in "${!bg_names[@]}"; do
    wait "${bg_pids[$i]}"
    if [ -s "$BG_DIR/$i" ]; then
      report "$(cat "$BG_DIR/$i")"
    else
      lost=$((lost + 1))
      printf '%-8s %s: its background runner ended without a result\n' NO-RESULT "${bg_names[$i]}"
    fi
  done
}

lost=0
: >"$OUT/results.tsv"
# shellcheck source=/dev/null
. "$PLAN"
wait_second_lane
collect_background
rm -rf "$BG_DIR"
# Counted from the results, which both lanes write.
ran=$(wc -l <"$OUT/results.tsv")
failed=$(awk -F'\t' '$2 != "OK"' "$OUT/results.tsv" | wc -l)
echo "$ran" >"$OUT/done"
[ "$failed" = 0 ] && [ "$lost" = 0 ]
