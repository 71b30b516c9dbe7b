#!/usr/bin/env bash
# pg_regress of the extension's SQL objects (sql/, expected/) against a
# temporary instance with shared_preload_libraries = 'pg_rdma', using the
# built module through a staged installation (stage.sh).
# Usage: regress.sh BUILT_PG_RDMA_SO SERVER_EXT_SOURCE_DIR
set -euo pipefail
so=$1 src=$2
here=$(dirname "$(readlink -f "$0")")
. "$here/stage.sh"

work=$(mktemp -d /tmp/pg_rdma-regress.XXXXXX)
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$work"' EXIT
mkdir "$work/out"
stage_install "$work" "$so" "$src"
cat >"$work/regress.conf" <<CONF
shared_preload_libraries = 'pg_rdma'
CONF
chmod a+r "$work/regress.conf"

pg_regress=$PG_PKGLIBDIR/pgxs/src/test/regress/pg_regress
if ! as_pg "$pg_regress" --bindir="$STAGE_BIN" --temp-instance="$work/tmp_check" \
        --temp-config="$work/regress.conf" --inputdir="$src" --outputdir="$work/out" \
        --no-locale --encoding=UTF8 --dbname=contrib_regression pg_rdma; then
    cat "$work/out/regression.diffs" 2>/dev/null || true
    cat "$work/out/log/postmaster.log" 2>/dev/null || true
    exit 1
fi
