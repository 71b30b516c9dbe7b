/* server_ext/pg_rdma--0.1.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION pg_rdma" to load this file. \quit

-- One row per live session that reached a pg_rdma address.
CREATE FUNCTION pg_stat_get_rdma(
    OUT pid int4,
    OUT client_addr inet,
    OUT client_port int4,
    OUT transport text,
    OUT device text,
    OUT protocol_version int4,
    OUT bytes_sent int8,
    OUT bytes_received int8,
    OUT rx_buffer_size int4,
    OUT backend_start timestamptz,
    OUT failed_over bool
)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pg_stat_get_rdma'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE VIEW pg_stat_rdma AS
    SELECT * FROM pg_stat_get_rdma();

-- Client addresses of every session: like pg_stat_activity's, not for everyone.
REVOKE ALL ON FUNCTION pg_stat_get_rdma() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pg_stat_get_rdma() TO pg_read_all_stats;
GRANT SELECT ON pg_stat_rdma TO pg_read_all_stats;
