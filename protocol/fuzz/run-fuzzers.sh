#!/usr/bin/env bash
# run-fuzzers.sh BUILD_DIR SECONDS
#
# Runs every protocol libFuzzer target for SECONDS each, starting from a
# scratch copy of its seed corpus (protocol/fuzz/corpus/<fuzzer>/), so the
# committed corpus is never modified. Prints one line per fuzzer with its
# exec count. Exits non-zero if a fuzzer is missing, crashes, leaks, times out
# or trips one of its property checks; the crashing inputs are kept in
# BUILD_DIR/protocol/fuzz/artifacts/<fuzzer>/ for reproduction.
#
# BUILD_DIR must be configured with: CXX=clang++ meson setup BUILD_DIR -Dfuzz=true
set -uo pipefail

FUZZERS=(fuzz_control fuzz_upgrade_reply fuzz_first_packet fuzz_connect_private_data fuzz_failover fuzz_probe_decline)
RSS_LIMIT_MB=2048     # far above what these decoders need: a leak or a blow-up
INPUT_TIMEOUT_S=10    # one 64-byte message never takes this long
MAX_INPUT_LEN=256     # longer than any message but a probe decline (whose lengths it still covers); longer inputs add nothing

if [ $# -ne 2 ] || ! [[ $2 =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 BUILD_DIR SECONDS" >&2
  exit 2
fi
build=$1
seconds=$2
corpus_root=$(cd "$(dirname "$0")" && pwd)/corpus

work=$(mktemp -d "${TMPDIR:-/tmp}/pg_rdma-fuzz.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT

# run_one NAME: fuzz one target; prints its line, returns non-zero on failure.
run_one() {
  local name=$1 exe="$build/protocol/fuzz/$1" dir="$work/$1" rc execs
  if [ ! -x "$exe" ]; then
    echo "$name: FAILED (no executable $exe; configure with -Dfuzz=true)"
    return 1
  fi
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp -R "$corpus_root/$name/." "$dir/corpus/" 2>/dev/null ||
    echo "$name: warning: no seed corpus in $corpus_root/$name" >&2
  "$exe" -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb="$RSS_LIMIT_MB" \
    -timeout="$INPUT_TIMEOUT_S" -max_len="$MAX_INPUT_LEN" \
    -artifact_prefix="$dir/artifacts/" "$dir/corpus" >"$dir/log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -n 1)
  if [ "$rc" -eq 0 ] && [ -n "$execs" ]; then
    echo "$name: ok, ${execs} execs in ${seconds} s"
    return 0
  fi
  echo "$name: FAILED (exit $rc, ${execs:-unknown} execs); log tail:"
  tail -n 30 "$dir/log" | sed 's/^/    /'
  mkdir -p "$build/protocol/fuzz/artifacts/$name"
  cp -R "$dir/artifacts/." "$build/protocol/fuzz/artifacts/$name/"
  echo "    inputs kept in $build/protocol/fuzz/artifacts/$name/"
  return 1
}

failed=0
for name in "${FUZZERS[@]}"; do
  run_one "$name" || failed=1
done
exit "$failed"
