# shellcheck shell=bash
# regress/lib/pair.sh — sourced by two-host tests (suite 'rdma-pair', run by
# regress/run-pair-suite): which side this is, and waits on the other side
# through files in the directory both guests share for the test.
#
#   pair_require              fails (exit 1, saying why) outside a two-host run
#   pair_role                 server (host A, 10.99.0.1) or client (host B, 10.99.0.2)
#   pair_signal NAME [TEXT]   tells the other side NAME (TEXT is its content)
#   pair_wait NAME SECS       waits for the other side's NAME, prints its TEXT;
#                             fails at once when the other side's test ended
#                             without it, or after SECS
#   pair_wait_end SECS        waits until the other side's test has ended
#                             (run-pair-tests.sh writes HOST.exit then);
#                             prints its exit status
#   pair_drop_roce TABLE      drops incoming RoCE v2 (UDP 4791) on this host's
#                             INPUT chain, TCP untouched, in nftables table
#                             TABLE (never on OUTPUT: regress/README.md)
#   pair_allow_roce TABLE     removes that table
#   pair_list_roce TABLE      prints it, with the count of dropped packets
#
# Files: $PG_RDMA_PAIR_DIR/HOST.NAME, written atomically (rename).

pair_require() {
    local v
    for v in RXE_HOST RXE_IP RXE_PEER_IP PG_RDMA_PAIR_DIR PG_RDMA_PAIR_ROLE; do
        [ -n "${!v:-}" ] && continue
        echo "pair: $v is not set: run in the two-host guests (regress/run-pair-suite BUILD_DIR)" >&2
        exit 1
    done
    [ -d "$PG_RDMA_PAIR_DIR" ] || { echo "pair: no shared directory $PG_RDMA_PAIR_DIR" >&2; exit 1; }
}

pair_role() { echo "$PG_RDMA_PAIR_ROLE"; }

_pair_peer() { if [ "$RXE_HOST" = A ]; then echo B; else echo A; fi; }

pair_signal() {
    local name=${1:?pair_signal NAME [TEXT]} file=$PG_RDMA_PAIR_DIR/$RXE_HOST.$1
    printf '%s\n' "${2:-}" >"$file.tmp" && mv "$file.tmp" "$file"
}

# _pair_wait_file FILE SECS WHAT: 0 once FILE exists; 1 when the other side
# ended first, or after SECS (wall clock: the guests' speed varies).
_pair_wait_file() {
    local file=$1 until=$((SECONDS + $2)) what=$3 peer
    peer=$(_pair_peer)
    while [ ! -e "$file" ]; do
        if [ "$file" != "$PG_RDMA_PAIR_DIR/$peer.exit" ] && [ -e "$PG_RDMA_PAIR_DIR/$peer.exit" ]; then
            # It may have signalled just before it ended.
            [ -e "$file" ] && return 0
            echo "pair: host $peer's side of the test ended (exit $(cat "$PG_RDMA_PAIR_DIR/$peer.exit")) without $what" >&2
            return 1
        fi
        if [ "$SECONDS" -ge "$until" ]; then
            echo "pair: no $what from host $peer ($RXE_PEER_IP) within $2 s" >&2
            return 1
        fi
        sleep 0.2
    done
}

pair_wait() {
    local name=${1:?pair_wait NAME SECS} secs=${2:?pair_wait NAME SECS} file
    file=$PG_RDMA_PAIR_DIR/$(_pair_peer).$name
    _pair_wait_file "$file" "$secs" "'$name'" && cat "$file"
}

pair_wait_end() {
    local secs=${1:?pair_wait_end SECS} file
    file=$PG_RDMA_PAIR_DIR/$(_pair_peer).exit
    _pair_wait_file "$file" "$secs" "its end" && cat "$file"
}

readonly PAIR_ROCE_V2_PORT=4791

pair_drop_roce() {
    local table=${1:?pair_drop_roce TABLE}
    timeout 20 nft -f - <<NFT
table inet $table {
    chain input {
        type filter hook input priority 0; policy accept;
        udp dport $PAIR_ROCE_V2_PORT counter drop
    }
}
NFT
}
pair_allow_roce() { timeout 20 nft delete table inet "${1:?pair_allow_roce TABLE}" 2>/dev/null; }
pair_list_roce() { timeout 20 nft list table inet "${1:?pair_list_roce TABLE}" 2>&1 | sed 's/^/   nft: /'; }
