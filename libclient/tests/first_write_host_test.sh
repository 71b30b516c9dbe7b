#!/usr/bin/env bash
# The first-write path (libclient/preload/first_write.hpp) on the host,
# where there is no RDMA device: which connections a driver-like program
# (first_write_probe: both ends of a TCP connection on 127.0.0.1) has
# judged, and that every byte of the others arrives as sent; what true and
# require do when RDMA is impossible; the servers file before WITH_RSOCKET,
# for drivers and for libpq's own attempts. The guest test client_drivers
# runs real drivers over real RDMA.
# Usage: first_write_host_test.sh LIBPQ_RDMA_SO FIRST_WRITE_PROBE PQ_FORMS
set -euo pipefail
so=$1 probe=$2 forms=$3
work=$(mktemp -d)
listener=''
trap '[ -z "$listener" ] || kill "$listener" 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
servers=$work/servers.conf
# probe MODE [ENV...]: stdout to $work/out, stderr to $work/err.
probe() {
    local mode=$1
    shift
    env -u WITH_RSOCKET PGRDMA_SERVERS_FILE="$servers" "$@" LD_PRELOAD="$so" timeout 30 "$probe" "$mode" \
        >"$work/out" 2>"$work/err" || fail "$mode $*: exit $?: $(cat "$work/out" "$work/err")"
}
says() { grep -qx "$1" "$work/out" || fail "$2: expected \"$1\", got: $(cat "$work/out" "$work/err")"; }
quiet() { [ ! -s "$work/err" ] || fail "$1 said on stderr: $(cat "$work/err")"; }
fallback_line='WARNING:  with_rsocket: RDMA is not possible for server "127.0.0.1", port [0-9]*: .*; continuing over TCP'

# 1. Nothing asks for RDMA: every mode as without the library.
: >"$servers"
for mode in startup nonblocking epoll_before_connect split writev cancel http read_first dup mapped; do
    probe "$mode"
    says "server got [0-9]* bytes as sent" "$mode, nothing asked"
    says "client got hello" "$mode, nothing asked"
    quiet "$mode, nothing asked"
done
echo "ok: with nothing asking for RDMA, every connection is left as it is"

# 2. A true rule: the PostgreSQL openers are judged, find no device, and
# their bytes go over TCP as sent, with one line; the rest are not judged.
printf '# the test server\n127.0.0.1 * true\n' >"$servers"
for mode in startup nonblocking epoll_before_connect writev mapped; do
    probe "$mode"
    says "server got [0-9]* bytes as sent" "$mode, true"
    says "client got hello" "$mode, true"
    grep -q "$fallback_line" "$work/err" || fail "$mode, true: no fallback line: $(cat "$work/err")"
    [ "$(wc -l <"$work/err")" = 1 ] || fail "$mode, true: more than one line: $(cat "$work/err")"
done
for mode in split cancel http read_first dup; do
    probe "$mode"
    says "server got [0-9]* bytes as sent" "$mode, true"
    quiet "$mode, true"
done
probe null_buffer
says "writev: EFAULT" "a null buffer"
echo "ok: true: openers fall back with their bytes as sent and one line; CancelRequest, HTTP, split headers, a server speaking first and a dup'ed number are left alone"

# 3. require: the write fails (ECONNREFUSED), nothing reaches the server,
# one line says why.
printf '127.0.0.1 * require\n' >"$servers"
for mode in startup nonblocking mapped; do
    probe "$mode"
    says "send: ECONNREFUSED" "$mode, require"
    says "server got 0 bytes changed" "$mode, require"
    grep -q 'WARNING:  with_rsocket=require: RDMA is not possible for server "127.0.0.1", port [0-9]*: .*; the connection fails' \
        "$work/err" || fail "$mode, require: $(cat "$work/err")"
done
echo "ok: require: the connection fails at its first write, nothing sent, with the reason"

# 4. The servers file before WITH_RSOCKET; WITH_RSOCKET where it names nothing.
printf '127.0.0.1 * false\n' >"$servers"
probe startup WITH_RSOCKET=require
says "server got [0-9]* bytes as sent" "false rule over WITH_RSOCKET=require"
quiet "false rule over WITH_RSOCKET=require"
printf '10.0.0.0/8 * false\n' >"$servers"
probe startup WITH_RSOCKET=true
grep -q "$fallback_line" "$work/err" || fail "WITH_RSOCKET=true where no rule applies: $(cat "$work/err")"
printf 'db.example.com * true\n127.0.0.1 * require\n' >"$servers"
probe startup
grep -q "servers.conf:1: \"db.example.com\" is not an IPv4 or IPv6 address (host names are not accepted); line ignored" \
    "$work/err" || fail "a bad line was not reported: $(cat "$work/err")"
says "send: ECONNREFUSED" "the line after a bad one"
echo "ok: a rule beats WITH_RSOCKET, WITH_RSOCKET covers the rest, a bad line is reported and the others stand"

# 5. libpq's own attempts: the servers file comes after the conninfo and the
# service section, before WITH_RSOCKET (a silent server: require fails at
# once, anything plain waits for libpq's connect_timeout).
"$probe" listen >"$work/port" &
listener=$!
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port")
[ -n "$port" ] || fail "the silent listener did not start"
silent="host=127.0.0.1 port=$port connect_timeout=2 user=app dbname=db"
printf '127.0.0.1 * require\n' >"$servers"
rc=0
env -u WITH_RSOCKET PGRDMA_SERVERS_FILE="$servers" LD_PRELOAD="$so" "$forms" connectdb "$silent" 2>"$work/err" || rc=$?
[ "$rc" != 0 ] && grep -q 'with_rsocket=require: RDMA is not possible' "$work/err" ||
    fail "libpq under a require rule: rc=$rc $(cat "$work/err")"
for override in "with_rsocket=false" ""; do
    env_set=()
    [ -n "$override" ] || { printf '127.0.0.1 * false\n' >"$servers"; env_set=(WITH_RSOCKET=require); }
    rc=0
    env -u WITH_RSOCKET PGRDMA_SERVERS_FILE="$servers" "${env_set[@]}" LD_PRELOAD="$so" \
        "$forms" connectdb "$silent $override" 2>"$work/err" || rc=$?
    [ "$rc" != 0 ] || fail "a silent server answered"
    ! grep -q 'with_rsocket' "$work/err" || fail "libpq '$override' ${env_set[*]}: the upgrade was tried: $(cat "$work/err")"
    grep -q 'timeout expired' "$work/err" || fail "libpq '$override': $(cat "$work/err")"
done
echo "ok: libpq attempts: a require rule applies where the conninfo says nothing; with_rsocket=false beats a rule, a false rule beats WITH_RSOCKET"
