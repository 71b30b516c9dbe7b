#!/usr/bin/env bash
# The Debian packages on a system that has never seen the build tree:
# install postgresql-N-pg-rdma and pg-rdma-client (built by scripts/test
# with scripts/lib/packages.sh), run a cluster with only what they
# installed (no staged files, the client library from its packaged path),
# a psql session over RDMA through the packaged pgrdma, then purge both and
# show that nothing they installed is left behind.
# Usage: packages_test.sh PACKAGE_DIR PG_MAJOR   (in the guest, as root)
set -euo pipefail
pkgdir=$1 major=$2
: "${RXE_IP:?run in the Soft-RoCE guest (regress/run-rdma-suite)}"
export DEBIAN_FRONTEND=noninteractive
# Nothing from the build tree on the way: only system directories.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
unset LD_PRELOAD PGRDMA_LIBRARY WITH_RSOCKET
server_pkg=postgresql-$major-pg-rdma client_pkg=pg-rdma-client
bindir=/usr/lib/postgresql/$major/bin
port=54460

fail() { echo "FAIL: $*"; [ -f "${work:-/nonexistent}/log" ] && tail -30 "$work/log"; exit 1; }
as_pg() { runuser -u postgres -- "$@"; }

debs=("$pkgdir/${server_pkg}_"*_amd64.deb "$pkgdir/${client_pkg}_"*_amd64.deb)
for d in "${debs[@]}"; do
    [ -f "$d" ] || fail "no $d: build the packages first (scripts/test does; or . scripts/lib/packages.sh; build_packages $major)"
done
# The guest's root is a throwaway layer over the host's: packages the host
# has installed (scripts/demo installs them) are purged here first, leaving
# the host untouched.
for p in "$server_pkg" "$client_pkg"; do
    if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
        dpkg --purge "$p" >/dev/null 2>&1 || fail "$p is installed and cannot be purged first"
        echo "note: $p was installed (from the host); purged in the guest first"
    fi
done

# Every path the packages hold (files and directories), and which of them
# exist before: after the purge exactly those must exist again. (Listing
# whole directories instead costs minutes over the guest's 9p root.)
work=$(mktemp -d /tmp/pg_rdma-packages.XXXXXX)
for d in "${debs[@]}"; do dpkg-deb -c "$d"; done | awk '{ print $6 }' | sed -e 's|^\.||' -e 's|/$||' -e '/^$/d' |
    LC_ALL=C sort -u >"$work/paths"
[ -s "$work/paths" ] || fail "the packages list no files"
snapshot() { while IFS= read -r p; do [ -e "$p" ] && printf '%s\n' "$p"; done <"$work/paths"; true; }
snapshot >"$work/before"

# man-db's trigger rebuilds the whole manual page index, minutes over the
# guest's 9p root under an emulated CPU; without this file it does nothing
# (man-db's own switch, in the guest's throwaway layer only).
rm -f /var/lib/man-db/auto-update
dpkg -i "${debs[@]}" >"$work/dpkg-install.log" 2>&1 || { cat "$work/dpkg-install.log"; fail "dpkg -i"; }
for p in "$server_pkg" "$client_pkg"; do
    dpkg-query -W -f='${Status}' "$p" | grep -q 'install ok installed' || fail "$p is not installed"
done
echo "ok: installed $(for d in "${debs[@]}"; do printf '%s (%s kB) ' "$(basename "$d")" $(($(stat -c %s "$d") / 1024)); done)"

# A cluster made only from what the system has: the packaged pg_rdma.so,
# its extension files, its sample configuration.
chown postgres "$work"
as_pg "$bindir/initdb" -D "$work/data" -U postgres --no-locale -A trust >/dev/null
sample=/usr/share/doc/$server_pkg/examples/postgresql.pg_rdma.conf
[ -f "$sample" ] || fail "the sample configuration is not where the package says: $sample"
{
    grep -v '^pg_rdma.listen_addresses' "$sample"
    printf "pg_rdma.listen_addresses = '%s'\nlisten_addresses = ''\nport = %s\nunix_socket_directories = '%s'\n" \
        "$RXE_IP" "$port" "$work"
} | as_pg tee -a "$work/data/postgresql.conf" >/dev/null
echo "host all all $RXE_IP/32 trust" | as_pg tee -a "$work/data/pg_hba.conf" >/dev/null
as_pg "$bindir/pg_ctl" -D "$work/data" -l "$work/log" -w -t 60 start >/dev/null || fail "the server did not start"
trap 'as_pg "$bindir/pg_ctl" -D "$work/data" -m immediate stop >/dev/null 2>&1 || true' EXIT
sql() { as_pg "$bindir/psql" -X -At -h "$work" -p "$port" -U postgres -d postgres "$@"; }
sql -c 'create extension pg_rdma' >/dev/null || fail "create extension pg_rdma"
lib=$(sql -c 'show pg_rdma.client_library')
[ "$lib" = /usr/lib/x86_64-linux-gnu/pg_rdma/libpq_rdma.so ] && [ -f "$lib" ] ||
    fail "pg_rdma.client_library is '$lib', not the packaged client library"
echo "ok: a cluster runs the packaged pg_rdma; its client library default is the packaged one ($lib)"

out=$(as_pg env PGCONNECT_TIMEOUT=60 /usr/bin/pgrdma "$bindir/psql" -X -At \
    -d "host=$RXE_IP port=$port user=postgres dbname=postgres with_rsocket=require" \
    -c "select transport from pg_stat_rdma where pid = pg_backend_pid()") || fail "psql through the packaged pgrdma: $out"
[ "$out" = rdma ] || fail "the session through the packaged pgrdma is on '$out'"
echo "ok: psql through /usr/bin/pgrdma with with_rsocket=require is on RDMA"

# A program built against the packaged header asks the library about its
# connection (PQrdmaInUse, PQrdmaAttribute); without the library it runs too.
cat >"$work/ask.c" <<'C'
#include <stdio.h>
#include <pg_rdma/libpq-rdma.h>
int main(int argc, char **argv) {
    PGconn *conn = PQconnectdb(argv[1]);
    if (PQstatus(conn) != CONNECTION_OK) { fprintf(stderr, "%s", PQerrorMessage(conn)); return 1; }
    if (PQrdmaInUse == NULL) printf("no library\n");
    else printf("%d %s\n", PQrdmaInUse(conn), PQrdmaAttribute(conn, "device"));
    PQfinish(conn);
    return 0;
}
C
cc -I"$(pg_config --includedir)" -o "$work/ask" "$work/ask.c" -lpq 2>"$work/cc.err" ||
    fail "a program including <pg_rdma/libpq-rdma.h> did not build: $(cat "$work/cc.err")"
chmod 755 "$work/ask"
conninfo="host=$RXE_IP port=$port user=postgres dbname=postgres with_rsocket=require"
out=$(as_pg /usr/bin/pgrdma "$work/ask" "$conninfo" 2>&1) || fail "the header's program under pgrdma: $out"
[ "$out" = "1 $RXE_DEV" ] || fail "PQrdmaInUse/PQrdmaAttribute under pgrdma said '$out', not '1 $RXE_DEV'"
out=$(as_pg "$work/ask" "host=$RXE_IP port=$port user=postgres dbname=postgres" 2>&1) ||
    fail "the header's program without the library: $out"
[ "$out" = "no library" ] || fail "without the library the header's program said '$out'"
echo "ok: a program built against the packaged <pg_rdma/libpq-rdma.h> learns its connection is on $RXE_DEV, and runs without the library"
man -w pgrdma >/dev/null 2>&1 || [ -f /usr/share/man/man1/pgrdma.1.gz ] || fail "no pgrdma man page"

# The packaged `pgrdma proxy` finds its program beside the library, and a
# plain psql through it lands on RDMA.
readonly PROXY_PORT=6498
WITH_RSOCKET=require /usr/bin/pgrdma proxy --listen "127.0.0.1:$PROXY_PORT" "$RXE_IP:$port" 2>"$work/proxy.err" &
proxy_pid=$!
trap 'kill "$proxy_pid" 2>/dev/null; as_pg "$bindir/pg_ctl" -D "$work/data" -m immediate stop >/dev/null 2>&1 || true' EXIT
for _ in $(seq 1 300); do grep -q '^pgrdma proxy: listening' "$work/proxy.err" && break; sleep 0.2; done
out=$(as_pg env PGCONNECT_TIMEOUT=60 "$bindir/psql" -X -At -d "host=127.0.0.1 port=$PROXY_PORT user=postgres dbname=postgres sslmode=disable" \
    -c "select transport from pg_stat_rdma where pid = pg_backend_pid()" 2>&1) ||
    fail "psql through the packaged pgrdma proxy: $out; the proxy said: $(cat "$work/proxy.err")"
[ "$out" = rdma ] || fail "the session through the packaged pgrdma proxy is on '$out'"
kill "$proxy_pid"
wait "$proxy_pid" || fail "the packaged proxy's exit status after SIGTERM: $?"
echo "ok: plain psql through the packaged pgrdma proxy is on RDMA"

# The packaged `pgrdma doctor` finds its program beside the library too,
# and the packaged server answers its probe.
out=$(/usr/bin/pgrdma doctor --quiet "$RXE_IP:$port" 2>&1) || fail "the packaged pgrdma doctor: $out"
grep -qF "verdict:     RDMA works to $RXE_IP:$port via $RXE_DEV" <<<"$out" || fail "the packaged pgrdma doctor said: $out"
echo "ok: the packaged pgrdma doctor: $(sed -n 's/^verdict: *//p' <<<"$out")"

trap 'as_pg "$bindir/pg_ctl" -D "$work/data" -m immediate stop >/dev/null 2>&1 || true' EXIT
as_pg "$bindir/pg_ctl" -D "$work/data" -m fast -w -t 60 stop >/dev/null || fail "the server did not stop"
trap - EXIT
dpkg --purge "$client_pkg" "$server_pkg" >"$work/dpkg-purge.log" 2>&1 || { cat "$work/dpkg-purge.log"; fail "dpkg --purge"; }
for p in "$server_pkg" "$client_pkg"; do
    ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || fail "$p is still installed"
done
snapshot >"$work/after"
if ! diff -u "$work/before" "$work/after" >"$work/left"; then
    cat "$work/left"
    fail "purging the packages left files behind or took others away (diff above)"
fi
echo "ok: purged; of the $(wc -l <"$work/paths") paths the packages held, the $(wc -l <"$work/before") that existed before exist, and no other"
rm -rf "$work"
