#!/usr/bin/env bash
# libpq_rdma.so on the host (no RDMA, no server needed): what libpq says is
# unchanged byte for byte when with_rsocket is absent or false, invalid
# values fail in libpq's wording before any connection, and the rest of the
# connection string is still libpq's to judge.
# Usage: preload_host_test.sh LIBPQ_RDMA_SO PQ_FORMS
set -euo pipefail
so=$1 forms=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
closed="host=127.0.0.1 port=1 connect_timeout=5"

for form in connectdb connectdb_params setdblogin start_poll start_select start_epoll; do
    "$forms" "$form" "$closed" >"$work/plain.out" 2>"$work/plain.err" && fail "$form connected to port 1"
    for extra in "" "with_rsocket=false" "with_rsocket=off"; do
        LD_PRELOAD=$so "$forms" "$form" "$closed $extra" >"$work/ours.out" 2>"$work/ours.err" &&
            fail "$form '$extra' connected to port 1"
        cmp -s "$work/plain.err" "$work/ours.err" || fail "$form '$extra': libpq said something else:
$(cat "$work/ours.err")
instead of
$(cat "$work/plain.err")"
    done
    LD_PRELOAD=$so "$forms" "$form" "$closed with_rsocket=maybe" 2>"$work/ours.err" && fail "$form accepted maybe"
    [ "$(cat "$work/ours.err")" = 'invalid with_rsocket value: "maybe"' ] || fail "$form maybe: $(cat "$work/ours.err")"
    LD_PRELOAD=$so "$forms" "$form" "$closed bogus=1 with_rsocket=true" 2>"$work/ours.err" && fail "$form accepted bogus"
    grep -q 'invalid connection option "bogus"' "$work/ours.err" || fail "$form bogus: $(cat "$work/ours.err")"
done
echo "ok: absent/false leave libpq's output unchanged; invalid values and unknown options fail as libpq's do"

# require over a Unix-domain socket can never be RDMA: it fails, saying so,
# in every connection form; true stays plain libpq there.
unix="host=$work port=5999"
for form in connectdb connectdb_params setdblogin start_poll start_select start_epoll; do
    LD_PRELOAD=$so "$forms" "$form" "$unix with_rsocket=require" >/dev/null 2>"$work/ours.err" &&
        fail "$form: require over a Unix socket connected"
    grep -q 'with_rsocket=require: RDMA is not possible over a Unix-domain socket' "$work/ours.err" ||
        fail "$form: require over a Unix socket did not say why: $(cat "$work/ours.err")"
    "$forms" "$form" "$unix" >/dev/null 2>"$work/plain.err" || true
    LD_PRELOAD=$so "$forms" "$form" "$unix with_rsocket=true" >/dev/null 2>"$work/ours.err" || true
    cmp -s "$work/plain.err" "$work/ours.err" || fail "$form: true over a Unix socket is not plain libpq: $(cat "$work/ours.err")"
done
echo "ok: require over a Unix-domain socket fails with the reason; true leaves it to plain libpq"
