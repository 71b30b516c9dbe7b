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
  local log=$1 prefix=${2:-}
  if [ ! -s "$log" ]; then
    tally_fail "no test log at $log (the suite did not run)"
    return
  fi
  local details counts
  details=$(mktemp) || details=/dev/null
  counts=$(python3 - "$log" "$prefix" "$details" <<'PY'
import json, sys
ok = bad = 0
names = []
excerpts = []

def excerpt(text, limit=24):
    # Catch2 says FAILED: under the assertion's file:line and before its
    # expansion; anything else is judged by its last lines.
    lines = [l for l in text.splitlines() if l.strip() and not set(l.strip()) <= set("-=.~")]
    picked = []
    for i, l in enumerate(lines):
        if "FAILED:" in l:
            picked.extend(n for n in range(max(0, i - 3), i + 5) if n < len(lines) and n not in picked)
    return [lines[n] for n in picked][:limit] if picked else lines[-10:]

for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
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
        excerpts.extend("    " + l[:300] for l in excerpt((r.get("stdout") or "") + "\n" + (r.get("stderr") or "")))
# The counts first: the words are a help, and nothing that goes wrong
# with them may lose a failure from the tally.
print(ok, bad, " ".join(names), flush=True)
try:
    with open(sys.argv[3], "w", encoding="utf-8", errors="replace") as f:
        if len(excerpts) > 120:
            excerpts = excerpts[:120] + ["    (more in the test logs)"]
        f.write("".join(l + "\n" for l in excerpts))
except Exception as e:
    print(f"tally: could not keep the failed tests' words: {e}", file=sys.stderr)
PY
)
  local ok bad names
  read -r ok bad names <<<"$counts"
  if ! [[ "$ok" =~ ^[0-9]+$ && "$bad" =~ ^[0-9]+$ ]]; then
    tally_fail "could not read the test log $log"
    ok=0 bad=0 names=''
  fi
  [ -s "$details" ] && TALLY_DETAILS+="$(cat "$details")"$'\n'
  [ "$details" = /dev/null ] || rm -f "$details"
  TALLY_PASSED=$((TALLY_PASSED + ok))
  TALLY_FAILED=$((TALLY_FAILED + bad))
  # Split on spaces only: a name is never a pattern for the shell to expand.
  local -a failed=()
  read -r -a failed <<<"$names"
  [ ${#failed[@]} -eq 0 ] || TALLY_FAILURES+=("${failed[@]}")
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
