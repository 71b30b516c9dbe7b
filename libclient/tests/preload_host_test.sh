#!/usr/bin/env bash
# libpq_rdma.so on the host (no RDMA, no server needed): what libpq says is
# unchanged byte for byte when with_rsocket is absent or false, invalid
# values fail in libpq's wording before any connection, and the rest of the
# connection string is still libpq's to judge.
# Usage: preload_host_test.sh LIBPQ_RDMA_SO PQ_FORMS CONNINFO_PROBE
set -euo pipefail
so=$1 forms=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
closed="host=127.0.0.1 port=1 connect_timeout=5"

# What every process under the preload loads with it: nothing but the C
# runtime. rdma-core's libraries come on a session's first use of RDMA
# (libclient/preload/rdma_libraries.hpp); libstdc++ is linked in, fmt is
# header-only, and the server's side (libcrypto) is not linked at all.
needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
beyond=$(tr ' ' '\n' <<<"$needed" | grep -v -E '^(ld-linux.*|libc\.so\..*|libm\.so\..*|libgcc_s\.so\..*|)$' || true)
[ -z "$beyond" ] || fail "libpq_rdma.so loads more than the C runtime at start: $beyond"
# And a session that does not ask for RDMA, or whose TCP connection never
# comes up, leaves rdma-core out of the process.
for extra in "" "with_rsocket=false" "with_rsocket=true"; do
    LD_DEBUG=files LD_PRELOAD=$so "$forms" connectdb "$closed $extra" >/dev/null 2>"$work/files.err" || true
    grep -q 'file=libpq.so' "$work/files.err" || fail "LD_DEBUG=files says nothing here: $(head -3 "$work/files.err")"
    ! grep -q 'file=librdmacm\|file=libibverbs' "$work/files.err" || fail "'$extra' without an upgrade loaded rdma-core"
done
echo "ok: libpq_rdma.so needs only $needed; sessions that never upgrade leave rdma-core unloaded"

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

# --- pg_service.conf (libpq 15 would reject the section's with_rsocket line) --
# Each case uses a Unix-socket host from the section, so the outcome shows
# both that libpq applied the section's other lines and which policy won:
# require fails saying why, true/false are plain libpq byte for byte.
probe=$3
sock="$work/sock"; mkdir -p "$sock"
unset PGSERVICE PGSERVICEFILE PGSYSCONFDIR WITH_RSOCKET
cat >"$work/services.conf" <<CONF
# RDMA sections for the preload test

[rdma_require]
  host=$sock
# a comment between the lines
with_rsocket=require
port=5999
[rdma_true]
with_rsocket=true
host=$sock
port=5999
[plain]
host=$sock
port=5999
[rdma_maybe]
host=$sock
with_rsocket=maybe
[broken]
with_rsocket=require
bogus=1
CONF
svc() { PGSERVICEFILE="$work/services.conf" "$@"; }
for form in connectdb connectdb_params setdblogin start_poll; do
    svc env LD_PRELOAD=$so "$forms" "$form" "service=rdma_require" >/dev/null 2>"$work/ours.err" &&
        fail "$form: service require over a Unix socket connected"
    grep -q "with_rsocket=require: RDMA is not possible over a Unix-domain socket" "$work/ours.err" ||
        fail "$form: the service section's require was not applied: $(cat "$work/ours.err")"
    grep -q "$sock/.s.PGSQL.5999" "$work/ours.err" || fail "$form: the section's host/port were not applied: $(cat "$work/ours.err")"
    # The connection's own value wins over the section's.
    svc "$forms" "$form" "service=plain" >/dev/null 2>"$work/plain.err" || true
    svc env LD_PRELOAD=$so "$forms" "$form" "service=rdma_require with_rsocket=false" >/dev/null 2>"$work/ours.err" || true
    cmp -s "$work/plain.err" "$work/ours.err" || fail "$form: with_rsocket=false did not win over the section: $(cat "$work/ours.err")"
    svc env LD_PRELOAD=$so "$forms" "$form" "service=rdma_true" >/dev/null 2>"$work/ours.err" || true
    cmp -s "$work/plain.err" "$work/ours.err" || fail "$form: a true section is not plain libpq over a Unix socket: $(cat "$work/ours.err")"
    svc env LD_PRELOAD=$so "$forms" "$form" "service=rdma_maybe" 2>"$work/ours.err" && fail "$form: section maybe accepted"
    [ "$(cat "$work/ours.err")" = 'invalid with_rsocket value: "maybe"' ] || fail "$form: section maybe: $(cat "$work/ours.err")"
    # libpq still judges the rest of the section, with its own line numbers.
    svc env LD_PRELOAD=$so "$forms" "$form" "service=broken" 2>"$work/ours.err" && fail "$form: bogus section line accepted"
    grep -q "syntax error in service file \"$work/services.conf\", line 20" "$work/ours.err" ||
        fail "$form: libpq's own service file error changed: $(cat "$work/ours.err")"
done
# Without the library libpq rejects the line (it rejects any keyword it does not know).
svc "$forms" connectdb "service=rdma_require" 2>"$work/plain.err" && fail "libpq accepted with_rsocket in a section"
grep -q 'syntax error in service file' "$work/plain.err" || fail "plain libpq: $(cat "$work/plain.err")"
# PGSERVICE names the section; WITH_RSOCKET loses to it and wins without it.
PGSERVICE=rdma_require WITH_RSOCKET=false svc env LD_PRELOAD=$so "$forms" connectdb "" >/dev/null 2>"$work/ours.err" &&
    fail "PGSERVICE: connected"
grep -q "with_rsocket=require: RDMA" "$work/ours.err" || fail "PGSERVICE's section did not win over WITH_RSOCKET: $(cat "$work/ours.err")"
PGSERVICE=plain WITH_RSOCKET=require svc env LD_PRELOAD=$so "$forms" connectdb "" >/dev/null 2>"$work/ours.err" &&
    fail "PGSERVICE plain + WITH_RSOCKET: connected"
grep -q "with_rsocket=require: RDMA" "$work/ours.err" || fail "WITH_RSOCKET under a silent section: $(cat "$work/ours.err")"
# The user file is ~/.pg_service.conf when PGSERVICEFILE is unset; the system
# file (PGSYSCONFDIR) is read when the user file lacks the section.
mkdir -p "$work/home" "$work/etc"
printf '[mine]\nhost=%s\nwith_rsocket=require\n' "$sock" >"$work/home/.pg_service.conf"
printf '[theirs]\nhost=%s\nwith_rsocket=require\n[mine]\nwith_rsocket=false\n' "$sock" >"$work/etc/pg_service.conf"
for s in mine theirs; do
    HOME="$work/home" PGSYSCONFDIR="$work/etc" LD_PRELOAD=$so "$forms" connectdb "service=$s" >/dev/null 2>"$work/ours.err" &&
        fail "service $s connected"
    grep -q "with_rsocket=require: RDMA" "$work/ours.err" || fail "service $s (home / system file): $(cat "$work/ours.err")"
done
# A file without a final newline: the last line reaches libpq whole.
printf '[tail]\nwith_rsocket=require\nhost=%s' "$sock" >"$work/tail.conf"
PGSERVICEFILE="$work/tail.conf" LD_PRELOAD=$so "$forms" connectdb "service=tail" >/dev/null 2>"$work/ours.err" &&
    fail "service tail connected"
grep -q "$sock/.s.PGSQL.5432" "$work/ours.err" || fail "the last line of a file without a final newline was cut: $(cat "$work/ours.err")"
echo "ok: pg_service.conf sections give with_rsocket by libpq's rules (PGSERVICEFILE, PGSERVICE, ~, PGSYSCONFDIR); the connection's own value wins; libpq judges the rest"

# --- PQconninfoParse, PQconndefaults, PQconninfo know the keyword ----------
out=$(LD_PRELOAD=$so "$probe" parse "host=h with_rsocket=on dbname=d") || fail "parse: $out"
grep -qx "with_rsocket=on" <<<"$out" || fail "PQconninfoParse lost the value: $out"
grep -qx "host=h" <<<"$out" || fail "PQconninfoParse lost host: $out"
out=$(LD_PRELOAD=$so "$probe" parse "postgresql://h/d?with_rsocket=require&sslmode=disable") || fail "parse uri: $out"
grep -qx "with_rsocket=require" <<<"$out" || fail "PQconninfoParse (URI) lost the value: $out"
out=$(LD_PRELOAD=$so "$probe" parse "host=h") || fail "parse: $out"
grep -qx "with_rsocket=(null)" <<<"$out" || fail "PQconninfoParse does not list the keyword: $out"
plain_parse=$("$probe" parse "host=h sslmode=prefer") && grep -qx "sslmode=prefer" <<<"$plain_parse" || fail "probe: $plain_parse"
[ "$plain_parse" = "$(LD_PRELOAD=$so "$probe" parse "host=h sslmode=prefer" | grep -v with_rsocket)" ] ||
    fail "PQconninfoParse's other options changed"
LD_PRELOAD=$so "$probe" parse "host=h bogus=1" 2>"$work/ours.err" && fail "parse accepted bogus"
"$probe" parse "host=h bogus=1" 2>"$work/plain.err" || true
cmp -s "$work/plain.err" "$work/ours.err" || fail "PQconninfoParse's error changed: $(cat "$work/ours.err")"
out=$(WITH_RSOCKET=true LD_PRELOAD=$so "$probe" defaults) || fail "defaults: $out"
grep -qx "with_rsocket=true" <<<"$out" || fail "PQconndefaults ignores WITH_RSOCKET: $out"
out=$(PGSERVICE=rdma_require svc env LD_PRELOAD=$so "$probe" defaults) || fail "defaults with a service: $out"
grep -qx "with_rsocket=require" <<<"$out" || fail "PQconndefaults ignores the service section: $out"
grep -qx "port=5999" <<<"$out" || fail "PQconndefaults lost the section's port: $out"
out=$(LD_PRELOAD=$so "$probe" conninfo "$closed with_rsocket=yes" 2>/dev/null) || fail "conninfo: $out"
grep -qx "with_rsocket=yes" <<<"$out" || fail "PQconninfo lost the value: $out"
out=$(WITH_RSOCKET=true LD_PRELOAD=$so "$probe" conninfo "$closed" 2>/dev/null) || fail "conninfo env: $out"
grep -qx "with_rsocket=true" <<<"$out" || fail "PQconninfo lost WITH_RSOCKET's value: $out"
out=$(LD_PRELOAD=$so "$probe" conninfo "$closed" 2>/dev/null) || fail "conninfo absent: $out"
grep -qx "with_rsocket=(null)" <<<"$out" || fail "PQconninfo with nothing set: $out"
# false is plain libpq: not echoed (a primary_conninfo must stay readable by
# a server without pg_rdma).
out=$(WITH_RSOCKET=true LD_PRELOAD=$so "$probe" conninfo "$closed with_rsocket=false" 2>/dev/null) || fail "conninfo false: $out"
grep -qx "with_rsocket=(null)" <<<"$out" || fail "PQconninfo echoed false: $out"
echo "ok: PQconninfoParse, PQconndefaults and PQconninfo list with_rsocket with the value that counts"
