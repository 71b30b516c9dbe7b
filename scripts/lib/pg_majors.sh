# Sourced by scripts/test and regress/run-rdma-suite: the PostgreSQL majors
# other than the machine's own (Debian 12's 15), each in a Debian root of
# its own where that major is a stock package.
#
# Debian 12 has only PostgreSQL 15. Binary packages of every suite are
# reachable, so 17 is built and tested inside a Debian 13 (trixie) root and
# 18 inside a sid root, each with that release's compiler, its server
# headers, libpq, Catch2 and rdma-core, and its server run there. A root is
# made once per machine (debootstrap, then apt-get: ~2 min) and kept under
# the build directory; the guest sees it through the build share.
#
# Layout, for major N:  $PG_RDMA_BUILD/pgN/root   the Debian root
#                       $PG_RDMA_BUILD/pgN/build  pg_rdma's meson build dir
# Inside the root the project and the build directory are mounted at the
# same paths as outside, so paths in the build dir mean the same everywhere.

# shellcheck source=scripts/lib/build.sh
. "$(dirname "${BASH_SOURCE[0]}")/build.sh"

PG_RDMA_OTHER_MAJORS=${PG_RDMA_OTHER_MAJORS-17 18}
PG_RDMA_DEBIAN_MIRROR=${PG_RDMA_DEBIAN_MIRROR:-http://deb.debian.org/debian}

# What a root holds: the build group of deps.sh for that release, the
# server and client, what the guest tests call (openssl for their
# certificates, ps/pkill, ip, prlimit and runuser), and Debian's packaging
# tools (packages.sh).
PG_ROOT_PACKAGES="meson ninja-build pkg-config g++ libibverbs-dev librdmacm-dev ibverbs-providers
  libssl-dev libfmt-dev catch2 libpq-dev libkrb5-dev patchelf openssl procps iproute2 util-linux ca-certificates
  build-essential debhelper dpkg-dev lintian"
# Bump when the set above changes: an older root is then rebuilt. (Not
# readonly: this file is sourced more than once, via packages.sh too.)
PG_ROOT_FORMAT=4

pg_major_suite() {
  case $1 in
    17) echo trixie ;;
    18) echo sid ;;
    *) return 1 ;;
  esac
}
pg_major_root() { echo "$PG_RDMA_BUILD/pg$1/root"; }
pg_major_build() { echo "$PG_RDMA_BUILD/pg$1/build"; }

# apt inside a root. sid's Release file may be past its Valid-Until on a
# mirror snapshot; the packages are still signed and checked.
_pg_root_apt() {
  local root=$1; shift
  in_pg_root_dir "$root" env DEBIAN_FRONTEND=noninteractive \
    apt-get -q -o Acquire::Check-Valid-Until=false -o DPkg::Lock::Timeout=600 "$@"
}

# ensure_pg_root MAJOR: the root for MAJOR, made if missing or stale.
# Quiet when it is there; ~2 minutes and ~2 GB when it is not.
ensure_pg_root() {
  local major=$1 suite root stamp want log
  suite=$(pg_major_suite "$major") || { echo "pg_rdma: no Debian suite known for PostgreSQL $major" >&2; return 1; }
  root=$(pg_major_root "$major")
  stamp=$root/.pg_rdma-root
  want="format $PG_ROOT_FORMAT suite $suite major $major"
  [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && return 0
  command -v debootstrap >/dev/null || { echo "pg_rdma: debootstrap is missing (ensure_packages majors)" >&2; return 1; }
  log=$(dirname "$root")/root.log
  echo "pg_rdma: making a Debian $suite root for PostgreSQL $major in $root (log: $log)" >&2
  mkdir -p "$(dirname "$root")" || return 1
  # --one-file-system: a debootstrap killed midway can leave proc or sys
  # mounted inside root.new.
  rm -rf --one-file-system "$root" "$root.new" || return 1
  # Made under another name and renamed last: an interrupted run leaves no
  # root that looks finished.
  if ! { debootstrap --variant=minbase "$suite" "$root.new" "$PG_RDMA_DEBIAN_MIRROR" &&
         _pg_root_apt "$root.new" update &&
         _pg_root_apt "$root.new" install -y --no-install-recommends $PG_ROOT_PACKAGES \
           "postgresql-$major" "postgresql-client-$major" "postgresql-server-dev-$major" &&
         _pg_root_apt "$root.new" clean; } >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    echo "pg_rdma: making the $suite root failed; see $log" >&2
    return 1
  fi
  echo "$want" >"$root.new/.pg_rdma-root" && mv "$root.new" "$root"
}

# in_pg_root_dir ROOT CMD...: runs CMD inside ROOT in a mount namespace of
# its own, with /proc, /sys, /dev, the project and the build directory
# mounted at their own paths, a fresh /tmp, /run and /dev/shm (tmpfs: Unix
# sockets do not work on the guest's 9p share), and the caller's working
# directory. Nothing outside the namespace sees these mounts.
in_pg_root_dir() {
  local root=$1; shift
  [ "$(id -u)" = 0 ] || { echo "pg_rdma: running in a Debian root needs root (chroot, mounts)" >&2; return 1; }
  local binds=("$PG_RDMA_ROOT") b
  case $PG_RDMA_BUILD/ in "$PG_RDMA_ROOT"/*) ;; *) binds+=("$PG_RDMA_BUILD") ;; esac
  # The root is bound onto itself first: a program in it that makes a mount
  # namespace of its own (a test hiding a library) needs / to be a mount.
  local script='set -e; r=$1; shift; n=$1; shift
    mount --bind "$r" "$r"
    for ((i = 0; i < n; i++)); do mkdir -p "$r$1"; mount --bind "$1" "$r$1"; shift; done
    mount -t proc proc "$r/proc"; mount --rbind /sys "$r/sys"; mount --rbind /dev "$r/dev"
    mount -t tmpfs -o mode=1777 tmpfs "$r/tmp"; mount -t tmpfs -o mode=0755 tmpfs "$r/run"
    mkdir -p "$r/dev/shm" 2>/dev/null || true; mount -t tmpfs -o mode=1777 tmpfs "$r/dev/shm"
    cp -L /etc/resolv.conf "$r/etc/resolv.conf" 2>/dev/null || true
    d=$PWD; exec chroot "$r" /bin/sh -c "cd \"\$0\" 2>/dev/null || cd /; exec \"\$@\"" "$d" "$@"'
  unshare --mount --propagation private -- bash -c "$script" in_pg_root "$root" "${#binds[@]}" "${binds[@]}" "$@"
}

# in_pg_root MAJOR CMD...: CMD inside MAJOR's root (see in_pg_root_dir).
in_pg_root() { local major=$1; shift; in_pg_root_dir "$(pg_major_root "$major")" "$@"; }

# build_major MAJOR [WERROR]: configure (once) and build pg_rdma for MAJOR
# inside its root, against that root's pg_config.
build_major() {
  local major=$1 werror=${2:-false} build
  build=$(pg_major_build "$major")
  ensure_pg_root "$major" || return 1
  if [ ! -f "$build/build.ninja" ]; then
    in_pg_root "$major" meson setup "$build" "$PG_RDMA_ROOT" -Dwerror="$werror" \
      -Dpg_config="/usr/lib/postgresql/$major/bin/pg_config" -Dtests=pg >/dev/null || return 1
  elif [ "$werror" = true ]; then
    in_pg_root "$major" meson configure "$build" -Dwerror=true >/dev/null || return 1
  fi
  quiet_compile in_pg_root "$major" meson compile -C "$build"
}
