# Sourced by scripts/test: counts results so the run ends with one honest line.

TALLY_PASSED=0
TALLY_FAILED=0
TALLY_FAILURES=()

# tally_meson_log LOG [PREFIX]: add the results of one `meson test` run (its
# testlog.json); PREFIX goes before each failed test's name ("pg17:").
# A skipped test counts as failed: no suite here may pass by not running.
tally_meson_log() {
  local log=$1 prefix=${2:-} counts
  if [ ! -s "$log" ]; then
    tally_fail "no test log at $log (the suite did not run)"
    return
  fi
  counts=$(python3 - "$log" "$prefix" <<'PY'
import json, sys
ok = bad = 0
names = []
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("result") == "OK":
        ok += 1
    else:
        bad += 1
        # One word per failure: the shell splits this list on spaces, and
        # meson's names have some ("pg_rdma:unit / protocol_nonce").
        names.append(f'{sys.argv[2]}{r.get("name")}={r.get("result")}'.replace(" ", ""))
print(ok, bad, " ".join(names))
PY
)
  local ok bad names
  read -r ok bad names <<<"$counts"
  TALLY_PASSED=$((TALLY_PASSED + ok))
  TALLY_FAILED=$((TALLY_FAILED + bad))
  [ -n "$names" ] && TALLY_FAILURES+=($names)
  return 0
}

tally_pass() { TALLY_PASSED=$((TALLY_PASSED + 1)); }
tally_fail() { TALLY_FAILED=$((TALLY_FAILED + 1)); TALLY_FAILURES+=("$1"); }

tally_report() {
  if [ ${#TALLY_FAILURES[@]} -gt 0 ]; then
    echo "failed:"
    printf '  %s\n' "${TALLY_FAILURES[@]}"
  fi
  echo "pg_rdma: $TALLY_PASSED passed, $TALLY_FAILED failed"
  [ "$TALLY_FAILED" -eq 0 ] && [ "$TALLY_PASSED" -gt 0 ]
}
