# Sourced by scripts/test and scripts/demo: the Debian packages, built from
# the work tree with Debian's own tooling (dpkg-buildpackage, debhelper's
# meson support) and checked with lintian.
#
# build_packages MAJOR: for PostgreSQL MAJOR, postgresql-MAJOR-pg-rdma (the
# server module, extension and sample configuration) and pg-rdma-client
# (libpq_rdma.so, pgrdma, its man page), built on this machine for the
# default major and inside the major's Debian root (pg_majors.sh) for the
# others, so each package is built against its own distribution. The
# .deb files end up in $PG_RDMA_BUILD/packages/pgMAJOR/ (PACKAGE_DEBS lists
# them); lintian's report is lintian.txt beside them and any error fails.

# shellcheck source=scripts/lib/pg_majors.sh
. "$(dirname "${BASH_SOURCE[0]}")/pg_majors.sh"

PG_RDMA_DEFAULT_MAJOR=15
PG_RDMA_VERSION=0.1.0

package_dir() { echo "$PG_RDMA_BUILD/packages/pg$1"; }
# The distribution a major's packages are built on, as a version suffix.
package_suffix() {
  case $1 in
    "$PG_RDMA_DEFAULT_MAJOR") echo deb12 ;;
    17) echo deb13 ;;
    18) echo sid ;;
    *) return 1 ;;
  esac
}

# _stage_source DIR MAJOR: the work tree's files (tracked, and new ones git
# does not ignore; edits included) in DIR, with debian/ made for MAJOR.
_stage_source() {
  local dir=$1 major=$2 f
  rm -rf "$dir" && mkdir -p "$dir" || return 1
  (cd "$PG_RDMA_ROOT" && git ls-files -z --cached --others --exclude-standard |
     while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
     cpio -0pdm --quiet "$dir") || return 1
  echo "$major" >"$dir/debian/pg_major"
  # Each distribution gets its own version (0.1.0~deb12, ~deb13, ~sid): the
  # client package is built once per root, and two builds of it must never
  # share a name and version.
  sed -i "1s/(\([^)]*\))/(\1~$(package_suffix "$major"))/" "$dir/debian/changelog"
  sed "s/@PG_MAJOR@/$major/g" "$dir/debian/control.in" >"$dir/debian/control"
  local name
  for f in "$dir"/debian/*@PG_MAJOR@*.in; do
    name=$(basename "$f" .in)
    sed "s/@PG_MAJOR@/$major/g" "$f" >"$dir/debian/${name//@PG_MAJOR@/$major}" && rm -f "$f" || return 1
  done
}

# _in_major MAJOR CMD...: CMD here for the default major, else in its root.
_in_major() {
  local major=$1; shift
  if [ "$major" = "$PG_RDMA_DEFAULT_MAJOR" ]; then "$@"; else in_pg_root "$major" "$@"; fi
}

build_packages() {
  local major=$1 out src log
  out=$(package_dir "$major")
  src=$out/pg-rdma-$PG_RDMA_VERSION
  log=$out/build.log
  [ "$major" = "$PG_RDMA_DEFAULT_MAJOR" ] || ensure_pg_root "$major" || return 1
  rm -rf "$out" && mkdir -p "$out" || return 1
  _stage_source "$src" "$major" || { echo "pg_rdma: staging the source for packages failed" >&2; return 1; }
  # -b: binary packages only; -us -uc: unsigned (a site signs its own repository).
  if ! (cd "$src" && _in_major "$major" dpkg-buildpackage -b -us -uc) >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "pg_rdma: dpkg-buildpackage for PostgreSQL $major failed; see $log" >&2
    return 1
  fi
  rm -rf "$src"
  PACKAGE_DEBS=("$out"/*.deb)
  [ -e "${PACKAGE_DEBS[0]}" ] || { echo "pg_rdma: no .deb in $out" >&2; return 1; }
  # Errors fail; warnings and notes are kept in the report.
  if ! (cd "$out" && _in_major "$major" lintian --fail-on error --info "${PACKAGE_DEBS[@]##*/}") >"$out/lintian.txt" 2>&1; then
    cat "$out/lintian.txt" >&2
    echo "pg_rdma: lintian found errors in the PostgreSQL $major packages" >&2
    return 1
  fi
}
