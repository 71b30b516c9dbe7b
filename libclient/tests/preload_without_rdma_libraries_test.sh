#!/usr/bin/env bash
# libpq_rdma.so on a host whose rdma-core libraries cannot be loaded: the
# preload loads them only when a session asks for RDMA
# (libclient/preload/rdma_libraries.hpp), so programs still start under it
# and with_rsocket is still a known option; require fails saying what to
# install, true warns and goes on as plain libpq. librdmacm is hidden in a
# private mount namespace (a file of no bytes bound over it), made here;
# without root or unprivileged user namespaces the test cannot hide it and
# reports itself skipped (77), never passed.
# Usage: preload_without_rdma_libraries_test.sh LIBPQ_RDMA_SO PQ_FORMS
set -euo pipefail
so=$1 forms=$2
fail() { echo "FAIL: $*"; exit 1; }

if [ "${PG_RDMA_TEST_IN_NAMESPACE:-}" != 1 ]; then
    for unshare in "unshare --mount" "unshare --map-root-user --mount"; do
        if $unshare true 2>/dev/null; then
            exec env PG_RDMA_TEST_IN_NAMESPACE=1 $unshare "$0" "$@"
        fi
    done
    echo "SKIP: no private mount namespace here (needs root or unprivileged user namespaces) to hide librdmacm in"
    exit 77
fi

# ldconfig lives in /sbin, which a user's PATH may lack. awk reads to the
# end: leaving early would kill ldconfig with SIGPIPE, which pipefail turns
# into the script's failure.
lib=$(PATH=$PATH:/sbin:/usr/sbin ldconfig -p | awk '$1 == "librdmacm.so.1" && !found { print $NF; found = 1 }')
[ -n "$lib" ] && [ -f "$lib" ] || fail "librdmacm.so.1 is not installed here: the build needs it"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: >"$work/empty"
mount --make-rprivate / 2>/dev/null || true
mount --bind "$work/empty" "$(readlink -f "$lib")" || fail "could not hide $lib"
# What the dynamic loader now says about the library, as a program would meet it.
python3 -c 'import ctypes; ctypes.CDLL("librdmacm.so.1")' 2>/dev/null && fail "librdmacm.so.1 still loads"

# A TCP server that takes a connection, reads what the client sends first
# and closes: enough for libpq to fail the same way with or without us.
python3 - "$work/port" <<'PY' &
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
while True:
    c, _ = s.accept()
    c.settimeout(5)
    try:
        c.recv(8)
    except OSError:
        pass
    c.close()
PY
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
[ -s "$work/port" ] || fail "the stand-in server did not start"
target="host=127.0.0.1 port=$(cat "$work/port") sslmode=disable gssencmode=disable connect_timeout=5"

# The preload itself loads: a program under it starts and runs.
LD_PRELOAD=$so /bin/true 2>"$work/true.err" || fail "a program under the preload did not run: $(cat "$work/true.err")"
[ ! -s "$work/true.err" ] || fail "the preload said something at load: $(cat "$work/true.err")"

for form in connectdb start_poll; do
    "$forms" "$form" "$target" >/dev/null 2>"$work/plain.err" && fail "$form connected to the stand-in"
    LD_PRELOAD=$so "$forms" "$form" "$target with_rsocket=require" >/dev/null 2>"$work/require.err" &&
        fail "$form: require connected without the RDMA libraries"
    grep -q 'with_rsocket=require: RDMA is not possible: the RDMA libraries could not be loaded ([^)]*librdmacm\.so\.1: ' \
        "$work/require.err" || fail "$form: require did not say the libraries are missing: $(cat "$work/require.err")"
    grep -q 'apt install librdmacm1 libibverbs1 ibverbs-providers' "$work/require.err" ||
        fail "$form: require did not say what to install: $(cat "$work/require.err")"
    LD_PRELOAD=$so "$forms" "$form" "$target with_rsocket=true" >/dev/null 2>"$work/true.err" &&
        fail "$form: true connected to the stand-in"
    grep -q '^WARNING:  with_rsocket: RDMA is not possible for server "127.0.0.1", port [0-9]*: the RDMA libraries could not be loaded' \
        "$work/true.err" || fail "$form: true did not warn: $(cat "$work/true.err")"
    grep -v '^WARNING:  with_rsocket:' "$work/true.err" >"$work/true.rest" || true
    cmp -s "$work/plain.err" "$work/true.rest" ||
        fail "$form: true did not go on as plain libpq: $(cat "$work/true.rest") instead of $(cat "$work/plain.err")"
done
echo "ok: without loadable RDMA libraries programs run under the preload; require fails naming what to install; true warns and is plain libpq"
