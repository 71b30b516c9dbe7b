# shellcheck shell=bash
# regress/pg/certs.sh — TLS for a test cluster (sourced by cluster.sh).
#
# pg_cluster_make_certs: a throwaway CA and a server certificate for the
# current cluster, so tests can use sslmode=require, verify-ca and
# verify-full (the certificate names PG_CLUSTER_HOST as an IP address, and
# localhost). Writes WORK/certs/ca.crt (pg_cluster_client hands it to libpq
# as PGSSLROOTCERT), DATA/server.crt and server.key, and turns ssl on, with
# ca.crt as ssl_ca_file (clients' certificates can then be checked).
# Call it before pg_cluster_start, or restart after it.
#
# EC P-256 keys: generating them is instant even on the guest's emulated CPU,
# and PostgreSQL 15 with OpenSSL 3 serves them like RSA ones.

_pg_cluster_openssl() { as_pg openssl "$@" >/dev/null 2>&1; }

pg_cluster_make_certs() {
    local dir=$PG_CLUSTER_WORK/certs data=$PG_CLUSTER_DATA
    local ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
    as_pg mkdir -p "$dir" || return 1
    # req -x509 marks the certificate as a CA (openssl.cnf's v3_ca section).
    _pg_cluster_openssl req -x509 "${ec[@]}" -days 2 -subj "/CN=pg_rdma test CA" \
        -keyout "$dir/ca.key" -out "$dir/ca.crt" ||
        { _pg_cluster_error "could not make the test CA"; return 1; }
    printf 'subjectAltName = IP:%s, DNS:localhost\nbasicConstraints = CA:FALSE\n' "$PG_CLUSTER_HOST" |
        _pg_cluster_write "$dir/server.ext"
    if ! _pg_cluster_openssl req -new "${ec[@]}" -subj "/CN=$PG_CLUSTER_HOST" \
            -keyout "$data/server.key" -out "$dir/server.csr" ||
        ! _pg_cluster_openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
            -CAcreateserial -days 2 -extfile "$dir/server.ext" -out "$data/server.crt"; then
        _pg_cluster_error "could not make the server certificate"
        return 1
    fi
    # PostgreSQL refuses a key file others can read.
    as_pg chmod 600 "$data/server.key" "$dir/ca.key"
    printf '%s\n' "ssl = on" "ssl_ca_file = '$dir/ca.crt'" |
        _pg_cluster_append "$data/postgresql.conf"
}
