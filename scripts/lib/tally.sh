# Sourced by scripts/test: counts results so the run ends with one honest line.

TALLY_PASSED=0
TALLY_FAILED=0
TALLY_FAILURES=()
# Why each failed test failed, a few lines each, printed again at the end:
# a CI page that shows only a run's head and tail still shows the reason.
TALLY_DETAILS=""

# tally_meson_log LOG [PREFIX]: add the results of one `meson test` run (its
# testlog.json); PREFIX goes before each failed test's name ("pg17:").
# A skipped test counts as failed: no suite here may pass by not running.
tally_meson_log() {
  local log=$1 prefix=${2:-} counts
  if [ ! -s "$log" ]; then
    tally_fail "no test log at $log (the suite did not run)"
    return
  fi
  local details
  details=$(mktemp)
  counts=$(python3 - "$log" "$prefix" "$details" <<'PY'
import json, sys
ok = bad = 0
names = []
excerpts = []

def excerpt(text, limit=24):
    # Catch2 says FAILED: under the assertion's file:line and before its
    # expansion; anything else is judged by its last lines.
    lines = [l for l in (text or "").splitlines() if l.strip() and not set(l.strip()) <= set("-=.")]
    picked = []
    for i, l in enumerate(lines):
        if "FAILED:" in l:
            picked.extend(lines[max(0, i - 3):i + 5])
    return (picked or lines[-10:])[:limit]

for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("result") == "OK":
        ok += 1
    else:
        bad += 1
        # One word per failure: the shell splits this list on spaces, and
        # meson's names have some ("pg_rdma:unit / protocol_nonce").
        name = f'{sys.argv[2]}{r.get("name")}={r.get("result")}'.replace(" ", "")
        names.append(name)
        excerpts.append(f"{name}:")
        excerpts.extend("    " + l[:300] for l in excerpt(r.get("stdout", "") + "\n" + (r.get("stderr") or "")))
with open(sys.argv[3], "w") as f:
    f.write("\n".join(excerpts[:120]) + ("\n" if excerpts else ""))
print(ok, bad, " ".join(names))
PY
)
  local ok bad names
  read -r ok bad names <<<"$counts"
  [ -s "$details" ] && TALLY_DETAILS+="$(cat "$details")"$'\n'
  rm -f "$details"
  TALLY_PASSED=$((TALLY_PASSED + ok))
  TALLY_FAILED=$((TALLY_FAILED + bad))
  [ -n "$names" ] && TALLY_FAILURES+=($names)
  return 0
}

tally_pass() { TALLY_PASSED=$((TALLY_PASSED + 1)); }
tally_fail() { TALLY_FAILED=$((TALLY_FAILED + 1)); TALLY_FAILURES+=("$1"); }

tally_report() {
  if [ -n "$TALLY_DETAILS" ]; then
    echo "why (each failed test's own words):"
    printf '%s' "$TALLY_DETAILS"
  fi
  if [ ${#TALLY_FAILURES[@]} -gt 0 ]; then
    echo "failed:"
    printf '  %s\n' "${TALLY_FAILURES[@]}"
  fi
  echo "pg_rdma: $TALLY_PASSED passed, $TALLY_FAILED failed"
  [ "$TALLY_FAILED" -eq 0 ] && [ "$TALLY_PASSED" -gt 0 ]
}
