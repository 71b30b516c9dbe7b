# Sourced by scripts/demo, scripts/test, scripts/bench and regress/rxe-guest.
# ensure_packages GROUP... installs the Debian 12 packages of each group that
# are missing, and prints nothing when there is nothing to do.

# What each group is for (README.md "Dependencies" says it for people):
PKGS_BUILD="meson ninja-build pkg-config g++ libibverbs-dev librdmacm-dev libssl-dev
  libfmt-dev catch2 postgresql-server-dev-15 libpq-dev libkrb5-dev patchelf"
PKGS_FUZZ="clang libclang-rt-14-dev"
PKGS_GUEST="qemu-system-x86 linux-image-amd64 busybox-static kmod iproute2 cpio gzip
  xz-utils rdma-core ibverbs-providers ibverbs-utils rdmacm-utils perftest nftables"
PKGS_PG="postgresql-15 postgresql-client-15"
# Drivers, the pooler and the metrics exporter the guest tests run
# (libclient/tests/rdma/drivers_test.sh, pgbouncer_test.sh,
# server_ext/tests/guest/session_test.sh; npm's node-postgres comes from
# scripts/lib/drivers.sh). Debian enables pgbouncer's and the exporter's own
# services (127.0.0.1:6432, :9187); the tests start their own.
PKGS_DRIVERS="python3-asyncpg python3-psycopg default-jdk-headless libpostgresql-jdbc-java nodejs pgbouncer
  prometheus-postgres-exporter"
# Debian roots for the other PostgreSQL majors (scripts/lib/pg_majors.sh).
PKGS_MAJORS="debootstrap"
# The Debian packages (scripts/lib/packages.sh).
PKGS_PACKAGES="build-essential debhelper dpkg-dev lintian"
PKGS_BENCH="gnuplot-nox valgrind"
# The RDMA tools a two-host bench runs on a real host (scripts/bench --peer):
# the guest's group without qemu and a kernel.
PKGS_PEER="rdma-core ibverbs-providers ibverbs-utils rdmacm-utils perftest iproute2"

ensure_packages() {
  local group pkg missing=()
  for group in "$@"; do
    local var="PKGS_${group^^}"
    for pkg in ${!var}; do
      dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
    done
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "pg_rdma: missing Debian packages: ${missing[*]}" >&2
    echo "pg_rdma: run as root, or install them with: sudo apt-get install ${missing[*]}" >&2
    return 1
  fi
  echo "pg_rdma: installing ${missing[*]}" >&2
  local apt=(apt-get -y -q --no-install-recommends -o DPkg::Lock::Timeout=600)
  export DEBIAN_FRONTEND=noninteractive
  # A fresh machine has no package lists yet; update once, then install.
  if ! "${apt[@]}" install "${missing[@]}" >/tmp/pg_rdma-apt.log 2>&1; then
    apt-get -q -o DPkg::Lock::Timeout=600 update >>/tmp/pg_rdma-apt.log 2>&1 &&
      "${apt[@]}" install "${missing[@]}" >>/tmp/pg_rdma-apt.log 2>&1 || {
        echo "pg_rdma: apt-get install failed; see /tmp/pg_rdma-apt.log" >&2
        tail -n 20 /tmp/pg_rdma-apt.log >&2
        return 1
      }
  fi
}
