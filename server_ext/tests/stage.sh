# Sourced by the server_ext test scripts. stage_install WORK SO SRC builds
# WORK/stage, a copy of the PostgreSQL 15 installation layout in which the
# built pg_rdma.so, pg_rdma.control and the pg_rdma--*.sql scripts replace installed
# ones, and sets STAGE_BIN to its bindir.
#
# Why: PostgreSQL 15 has no setting for the extension directory; it is
# <sharedir>/extension, where sharedir is found relative to the postgres
# executable's own (symlink-resolved) path. So postgres, initdb and pg_ctl
# are copied (not linked) into WORK/stage/<bindir>, and every other file of
# bindir, sharedir and pkglibdir is a symlink to the real one. Nothing is
# written outside WORK, so no root is needed and the machine's installation
# is never touched. When run as root, PostgreSQL (which refuses root) runs
# as the postgres user, which then owns WORK (as_pg).

PG_BINDIR=$(pg_config --bindir)
PG_SHAREDIR=$(pg_config --sharedir)
PG_PKGLIBDIR=$(pg_config --pkglibdir)

as_pg() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# link_all FROM TO [EXCEPT]: symlink every entry of FROM but EXCEPT into TO,
# with one ln: in the guest (emulated CPU) each fork costs tens of ms, and
# the three directories hold ~300 entries.
link_all() {
    local entry entries=()
    for entry in "$1"/*; do [ "${entry##*/}" = "${3:-}" ] || entries+=("$entry"); done
    ln -s "${entries[@]}" "$2/"
}

stage_install() {
    local work=$1 so=$2 src=$3 stage=$1/stage
    mkdir -p "$stage$PG_BINDIR" "$stage$PG_SHAREDIR/extension" "$stage$PG_PKGLIBDIR"
    link_all "$PG_BINDIR" "$stage$PG_BINDIR"
    local exe
    for exe in postgres initdb pg_ctl; do
        rm "$stage$PG_BINDIR/$exe"
        cp "$PG_BINDIR/$exe" "$stage$PG_BINDIR/$exe"
    done
    link_all "$PG_SHAREDIR" "$stage$PG_SHAREDIR" extension
    link_all "$PG_SHAREDIR/extension" "$stage$PG_SHAREDIR/extension"
    link_all "$PG_PKGLIBDIR" "$stage$PG_PKGLIBDIR"
    rm -f "$stage$PG_SHAREDIR/extension"/pg_rdma* "$stage$PG_PKGLIBDIR/pg_rdma.so"
    cp "$src/pg_rdma.control" "$src"/pg_rdma--*.sql "$stage$PG_SHAREDIR/extension/"
    cp "$so" "$stage$PG_PKGLIBDIR/pg_rdma.so"
    if [ "$(id -u)" = 0 ]; then chown -R postgres "$work"; fi
    STAGE_BIN=$stage$PG_BINDIR
}
