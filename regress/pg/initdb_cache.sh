# shellcheck shell=bash
# regress/pg/initdb_cache.sh — initdb for test clusters, cached (sourced by
# cluster.sh).
#
# Why: in the guest (emulated CPU) initdb takes 15-60 s, unpacking its result
# ~1.5 s. Every cluster made with the same postgres executable and the same
# initdb options is the same (the system identifier aside, which only
# replication cares about, and pg_basebackup copies it), so the first one is
# kept as a tar file in BUILD/regress/pg/initdb-cache/ (one file: 9p in the
# guest is slow per file, not per byte) and later clusters unpack it. The
# key is the executable's size and mtime plus the options; a new key
# replaces the old file. Best effort: a cache that cannot be written only
# costs time. PG_CLUSTER_INITDB_CACHE=0 always runs initdb.

# The options of every test cluster: trust over the Unix socket (the
# harness's own access; the socket is in the cluster's private WORK),
# scram-sha-256 over TCP, no fsync (throwaway clusters).
PG_CLUSTER_INITDB_ARGS=(-U postgres --no-locale -E UTF8 --auth-local=trust --auth-host=scram-sha-256 --no-sync)

# _pg_cluster_initdb DATA BUILD: a fresh cluster in DATA (which must not exist).
_pg_cluster_initdb() {
    local data=$1 cache=$2/regress/pg/initdb-cache key
    key=$(printf '%s|%s' "$(stat -Lc '%s %Y' "$PG_BINDIR/postgres")" "${PG_CLUSTER_INITDB_ARGS[*]}" | cksum)
    local tarball=$cache/${key%% *}.tar
    if [ "${PG_CLUSTER_INITDB_CACHE:-1}" != 0 ] && [ -f "$tarball" ]; then
        mkdir "$data" || return 1
        if tar -C "$data" -xpf "$tarball" 2>/dev/null; then
            if [ "$(id -u)" = 0 ]; then chown -R postgres "$data"; fi
            return 0
        fi
        # Replaced or removed while we read it (tests run in two lanes): a
        # cache miss, not a failure. (DATA is ours: we just made it.)
        rm -rf "$data"
    fi
    if ! as_pg "$PG_CLUSTER_BIN/initdb" -D "$data" "${PG_CLUSTER_INITDB_ARGS[@]}" >"$data.initdb.log" 2>&1; then
        cat "$data.initdb.log" >&2
        return 1
    fi
    [ "${PG_CLUSTER_INITDB_CACHE:-1}" != 0 ] || return 0
    # Written under a temporary name and renamed: a concurrent test never
    # unpacks half a file. Only other keys' files are removed: a test in
    # the other lane may be unpacking this one.
    local old
    {
        mkdir -p "$cache" && for old in "$cache"/*.tar; do [ "$old" = "$tarball" ] || rm -f "$old"; done &&
            tar -C "$data" -cf "$tarball.$$" . && mv -f "$tarball.$$" "$tarball"
    } 2>/dev/null || rm -f "$tarball.$$"
    return 0
}
