#!/usr/bin/env bash
# perf/stream-cost.sh BUILD_DIR
#
# Runs on the host (no RDMA needed). Counts, with valgrind's callgrind, the
# instructions pg_rdma's own transport code spends per message in a
# ping-pong over the in-memory link (transport/tests/stream_cost.cpp, built
# here in BUILD_DIR): the functions of namespace pg_rdma::transport,
# headers inlined into them included, so neither the link nor the driver is
# counted, nor the verbs calls a real device would add (the same for every
# program), nor libc's memcpy. A count of instructions is the same on any
# machine, busy or quiet, where the guest's timings are not: it is how a
# change to the data path is weighed. It depends on the compiler and the
# build type, which the first line names. Prints
# `cost compiler=... buildtype=...`, then one line per size:
# `cost size=N instructions_per_message=M`. Exit status 1, and no size
# lines at all, when any run fails.
set -uo pipefail

if [ $# -ne 1 ]; then
  sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0" >&2
  exit 2
fi
BUILD=$1
BIN=$BUILD/transport/tests/stream_cost
readonly BUILD BIN
readonly SIZES="64 1024 4096"
readonly RUN_TIMEOUT_S=300

command -v valgrind >/dev/null || { echo "stream-cost: valgrind is not installed" >&2; exit 1; }
meson compile -C "$BUILD" stream_cost >/dev/null || { echo "stream-cost: could not build stream_cost" >&2; exit 1; }
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT

# What the counts depend on, from meson's own record of the build.
setup=$(meson introspect --buildoptions "$BUILD" 2>/dev/null |
  python3 -c 'import json,sys; o={x["name"]: x["value"] for x in json.load(sys.stdin)}; print(o.get("buildtype", "?"))' 2>/dev/null)
# The C++ compiler is the first word of ninja's compile rule.
cxx=$(sed -n '/^rule cpp_COMPILER/{n;s/^ *command = \([^ ]*\).*/\1/p;q}' "$BUILD/build.ninja" 2>/dev/null)
compiler=$({ [ -n "$cxx" ] && "$cxx" --version 2>/dev/null | head -1; } | tr ' ' '_')
lines=("cost compiler=${compiler:-?} buildtype=${setup:-?}")

for size in $SIZES; do
  STREAM_COST_SIZE=$size timeout "$RUN_TIMEOUT_S" valgrind --tool=callgrind \
    --toggle-collect='*measured_round_trips*' --callgrind-out-file="$out/$size.out" \
    "$BIN" '[.cost]' >"$out/$size.log" 2>&1 || {
      echo "stream-cost: the run at $size B failed:" >&2
      tail -5 "$out/$size.log" >&2
      exit 1
    }
  messages=$(sed -n 's/^messages=\([0-9][0-9]*\)$/\1/p' "$out/$size.log")
  [ -n "$messages" ] || { echo "stream-cost: the run at $size B did not say how many messages" >&2; exit 1; }
  # One line per function: "COUNT (PCT%)  FILE:FUNCTION [OBJECT]". Code
  # inlined from a header is listed under the header's file but the
  # function it was inlined into, so the function's namespace decides.
  line=$(callgrind_annotate --auto=no --threshold=100 "$out/$size.out" |
    awk -v size="$size" -v messages="$messages" '
      /^ *[0-9][0-9,]* +\([ 0-9.]+%\) +/ {
        count = $1; gsub(",", "", count)
        rest = $0; sub(/^ *[0-9,]+ +\([ 0-9.]+%\) +/, "", rest)
        function_name = rest; sub(/^[^:]*:/, "", function_name)
        if (function_name ~ /^pg_rdma::transport::/) sum += count
      }
      END {
        if (sum == 0) exit 1
        printf "cost size=%d instructions_per_message=%.0f\n", size, sum / messages
      }') || { echo "stream-cost: nothing of pg_rdma::transport counted at $size B" >&2; exit 1; }
  lines+=("$line")
done
printf '%s\n' "${lines[@]}"
