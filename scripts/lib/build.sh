# Sourced by scripts/*: where things are, and how to configure and build.

PG_RDMA_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PG_RDMA_BUILD=${PG_RDMA_BUILD:-$PG_RDMA_ROOT/build}
PG_RDMA_FUZZ_BUILD=${PG_RDMA_FUZZ_BUILD:-$PG_RDMA_ROOT/build-fuzz}

# quiet_compile CMD...: runs CMD (a meson compile) without ninja's progress
# lines; returns CMD's own status. (The filter may print nothing, which is
# grep's "no match": it must not be taken for the build's status, nor hide
# it: PIPESTATUS is read right after the pipeline.)
quiet_compile() {
  local st
  "$@" | { grep -vE '^\[[0-9]+/[0-9]+\]|^ninja: (Entering|no work)|^INFO: (autodetecting|calculating backend)' || true; }
  st=("${PIPESTATUS[@]}")
  return "${st[0]}"
}

# build_project [WERROR]: configure once (later runs only rebuild), then
# compile. WERROR=true (scripts/test) turns warnings into errors, in a build
# configured before too; false (demo, bench) only configures a new build
# so: flipping the option on an existing build would recompile every file
# into the same binaries. So after scripts/test, a compiler that warns
# fails demo and bench too; the failure says how to turn it off.
build_project() {
  local werror=${1:-false}
  if [ ! -f "$PG_RDMA_BUILD/build.ninja" ]; then
    meson setup "$PG_RDMA_BUILD" "$PG_RDMA_ROOT" -Dwerror="$werror" >/dev/null
  elif [ "$werror" = true ]; then
    meson configure "$PG_RDMA_BUILD" -Dwerror=true >/dev/null
  fi
  local rc=0
  quiet_compile meson compile -C "$PG_RDMA_BUILD" || rc=$?
  if [ "$rc" -ne 0 ] && [ "$werror" != true ] &&
     meson introspect --buildoptions "$PG_RDMA_BUILD" 2>/dev/null | grep -q '"name": "werror", "value": true'; then
    echo "pg_rdma: $PG_RDMA_BUILD treats warnings as errors (scripts/test set it); to build past warnings: meson configure $PG_RDMA_BUILD -Dwerror=false" >&2
  fi
  return "$rc"
}

# The fuzzers need clang's libFuzzer runtime, so they live in a build of their own.
build_fuzzers() {
  if [ ! -f "$PG_RDMA_FUZZ_BUILD/build.ninja" ]; then
    CXX=clang++ meson setup "$PG_RDMA_FUZZ_BUILD" "$PG_RDMA_ROOT" -Dfuzz=true -Dwerror=true >/dev/null
  fi
  quiet_compile meson compile -C "$PG_RDMA_FUZZ_BUILD"
}
