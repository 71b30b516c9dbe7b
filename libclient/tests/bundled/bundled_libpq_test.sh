#!/usr/bin/env bash
# libpq_rdma.so in a program whose libpq is a private copy under another
# soname (what auditwheel makes of a binary Python wheel's libpq): no
# libpq.so.5 in the process at all. Linked directly, and inside a module
# loaded with RTLD_LOCAL. Under the preload such a program must never
# crash (it was killed by SIGABRT before), libpq must say what it says
# without the preload, and with_rsocket must work on that copy too.
# Usage: bundled_libpq_test.sh LIBPQ_RDMA_SO PQ_FORMS BUNDLED_MODULE BUNDLED_LOADER
set -euo pipefail
so=$1 forms=$2 module=$3 loader=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
closed="host=127.0.0.1 port=1 connect_timeout=5"
# shellcheck source=libclient/tests/bundled/rename_libpq.sh
. "$(dirname "$(readlink -f "$0")")/rename_libpq.sh"
rename_libpq "$work" "$forms" "$module" || fail "could not make the renamed copy"
renamed=$RENAMED_LIBPQ

# Nothing named libpq.so.5 may be in either process, or this tests nothing.
for run in "$work/forms connectdb" "$loader $work/lib/module.so"; do
    LD_DEBUG=files LD_PRELOAD=$so $run "$closed" >/dev/null 2>"$work/files.err" || true
    grep -q "file=$renamed" "$work/files.err" || fail "$run did not load $renamed: $(head -3 "$work/files.err")"
    # (libpq_rdma.so asks for libpq.so.5 with RTLD_NOLOAD, which ld.so
    # reports too: only a link map generated for it means it was loaded.)
    ! grep -q 'file=libpq\.so\.5 .*generating link map' "$work/files.err" || fail "$run loaded libpq.so.5 as well"
done
echo "ok: two programs whose only libpq is $renamed (linked, and in an RTLD_LOCAL module)"

# run NAME CMD...: CMD's exit status, stdout and stderr in $work/NAME.*;
# a death by signal (status > 128) fails the test there and then.
run() {
    local name=$1; shift
    local rc=0
    "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
    echo "$rc" >"$work/$name.rc"
    [ "$rc" -lt 128 ] || fail "$* was killed by signal $((rc - 128)): $(cat "$work/$name.err")"
}
same_as_plain() {
    cmp -s "$work/plain.err" "$work/$1.err" && [ "$(cat "$work/plain.rc")" = "$(cat "$work/$1.rc")" ] ||
        fail "$2: not what libpq says alone (exit $(cat "$work/$1.rc")):
$(cat "$work/$1.err")
instead of (exit $(cat "$work/plain.rc")):
$(cat "$work/plain.err")"
}

for prog in forms:connectdb forms:connectdb_params forms:setdblogin forms:start_poll forms:start_epoll module; do
    if [ "$prog" = module ]; then cmd=("$loader" "$work/lib/module.so")
    else cmd=("$work/forms" "${prog#forms:}"); fi
    run plain "${cmd[@]}" "$closed"
    [ "$(cat "$work/plain.rc")" = 1 ] || fail "$prog: a closed port gave exit $(cat "$work/plain.rc") without the preload"
    for extra in "" "with_rsocket=false"; do
        run ours env LD_PRELOAD="$so" "${cmd[@]}" "$closed $extra"
        same_as_plain ours "$prog under the preload ('$extra')"
    done
    # The wrappers act on the private copy: with_rsocket is understood
    # (libpq alone would call it an invalid option) and judged.
    run maybe env LD_PRELOAD="$so" "${cmd[@]}" "$closed with_rsocket=maybe"
    grep -q 'invalid with_rsocket value: "maybe"' "$work/maybe.err" ||
        fail "$prog: with_rsocket=maybe was not judged by libpq_rdma.so: $(cat "$work/maybe.err")"
    run env_true env LD_PRELOAD="$so" WITH_RSOCKET=true "${cmd[@]}" "$closed"
    same_as_plain env_true "$prog with WITH_RSOCKET=true and no server"
    run conn_true env LD_PRELOAD="$so" "${cmd[@]}" "$closed with_rsocket=true"
    same_as_plain conn_true "$prog with with_rsocket=true and no server"
done
echo "ok: under the preload, each form on the private copy says what libpq says alone, and with_rsocket is understood there"
