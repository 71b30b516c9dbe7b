# shellcheck shell=bash
# regress/pg/cluster_env.sh — sourced by regress/pg/cluster.sh and by
# callers that only need to switch to a cluster made earlier (perf's
# db-server.sh, one call per step over ssh): nothing here runs a program,
# so loading it costs no CPU a step's reading would count.

# pg_cluster_use WORK: makes the cluster in WORK the current one. cluster.env
# holds `declare --` lines, which inside this function would only make
# locals: they are read as global declarations.
pg_cluster_use() {
    local env
    env=$(<"${1:?pg_cluster_use WORK}/cluster.env") || return 1
    eval "${env//declare -- /declare -g }"
}
