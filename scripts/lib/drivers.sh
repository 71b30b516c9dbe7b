# Sourced by scripts/test: the npm drivers the guest's driver tests run
# (libclient/tests/rdma/drivers/package.json, exact versions), installed
# from the npm registry into BUILD/node_drivers with the machine's Node.js.
# Debian's drivers (asyncpg, psycopg 3, pgJDBC) come from deps.sh.

# ensure_node_drivers BUILD: installs them when missing or when
# package.json changed; quiet when nothing is to do.
ensure_node_drivers() {
  local build=${1:?ensure_node_drivers BUILD} dir want
  mkdir -p "$build/node_drivers" || return 1
  dir=$(cd "$build/node_drivers" && pwd)
  want=$PG_RDMA_ROOT/libclient/tests/rdma/drivers/package.json
  if [ -d "$dir/node_modules" ] && cmp -s "$want" "$dir/package.json"; then return 0; fi
  command -v npm >/dev/null || { echo "pg_rdma: npm is not installed (Debian: apt-get install npm)" >&2; return 1; }
  cp "$want" "$dir/package.json" || return 1
  rm -f "$dir/package-lock.json"
  if ! (cd "$dir" && npm install --no-audit --no-fund --loglevel=error >"$dir/npm.log" 2>&1); then
    echo "pg_rdma: npm install of the driver tests' packages failed; see $dir/npm.log" >&2
    tail -n 5 "$dir/npm.log" >&2
    rm -f "$dir/package.json"
    return 1
  fi
}
