#!/usr/bin/env bash
# pg_rdma.so exports exactly the names exports.map lists, and the map lists
# every C function the extension's SQL scripts name (and its pg_finfo_),
# so that a function added to the SQL without the map fails here, not at
# CREATE EXTENSION, and no transport symbol leaks into a backend's global
# scope again.
# Usage: exports_test.sh BUILT_PG_RDMA_SO SERVER_EXT_SOURCE_DIR
set -euo pipefail

if [ $# -ne 2 ]; then
  sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0" >&2
  exit 2
fi
module=$1
src=$2

# The names between "global:" and "local:", one per line.
listed=$(sed -n '/global:/,/local:/p' "$src/exports.map" | sed 's/global://; s/local:.*//' |
  tr ';' '\n' | tr -d ' \t' | grep -v '^$' | sort)
exported=$(nm -D --defined-only "$module" | awk '{print $3}' | sort)

failed=0
if [ "$listed" != "$exported" ]; then
  echo "FAIL: pg_rdma.so's exports differ from exports.map (< map only, > module only):"
  diff <(echo "$listed") <(echo "$exported") | grep '^[<>]' || true
  failed=1
fi

# AS 'MODULE_PATHNAME', 'name' in every SQL script of the extension. None
# found means this pattern no longer reads the scripts: that fails too.
functions=$(sed -n "s/.*'MODULE_PATHNAME', *'\([A-Za-z_0-9]*\)'.*/\1/p" "$src"/pg_rdma--*.sql | sort -u)
[ -n "$functions" ] || { echo "FAIL: found no C function in $src/pg_rdma--*.sql"; failed=1; }
for fn in $functions; do
  for name in "$fn" "pg_finfo_$fn"; do
    grep -qx "$name" <<<"$listed" || { echo "FAIL: the SQL names $fn, but exports.map lacks $name"; failed=1; }
  done
done

[ $failed = 0 ] && echo "ok: pg_rdma.so exports the $(wc -l <<<"$listed") names of exports.map, the SQL's functions among them"
exit $failed
