#!/usr/bin/env bash
# perf/peer-server.sh TAG TIMEOUT_S CMD [ARG...]
#
# Runs on the peer host of a two-host benchmark (scripts/bench transport
# --peer), started over ssh by perf/run-transport-bench.sh: one server of
# a measurement, bounded by TIMEOUT_S. Its output is the ssh session's, so
# the other host reads the server's log as it comes. At the end it prints
# a line "@@cpu" and bash's `times` (the second line: the server's user and
# system time), which run-transport-bench.sh keeps as the server's CPU, as
# it does for a server of its own. /tmp/pg_rdma-bench-TAG.pid names the
# process whose children `peer-server.sh stop TAG` ends, for a server
# whose client failed.
set -u
if [ "${1:-}" = stop ] && [ $# -eq 2 ]; then
  pidfile=/tmp/pg_rdma-bench-$2.pid
  pid=$(cat "$pidfile" 2>/dev/null)
  # Only a wrapper of ours: a file left by an aborted run may name a PID
  # that is now another process's.
  [ -n "$pid" ] && grep -qs peer-server.sh "/proc/$pid/cmdline" && pkill -TERM -x -P "$pid" timeout
  exit 0
fi
[ $# -ge 3 ] || { sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0" >&2; exit 2; }
tag=$1 limit=$2
shift 2
pidfile=/tmp/pg_rdma-bench-$tag.pid
(
  timeout "$limit" "$@"
  rc=$?
  echo "@@cpu"
  times
  exit $rc
) &
child=$!
echo "$child" >"$pidfile"
wait "$child"
rc=$?
rm -f "$pidfile"
exit $rc
