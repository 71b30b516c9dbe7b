/* server_ext/pg_rdma--0.1--0.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_rdma UPDATE TO '0.2'" to load this file. \quit

-- pg_stat_rdma says whether the client asked for RDMA and, on TCP, why;
-- every role sees its own sessions' rows (the function hides the details
-- of other roles' sessions from roles without pg_read_all_stats). A
-- function's columns cannot change in place, so the view moves to a new
-- one (the same C function, which answers either declaration); CREATE OR
-- REPLACE VIEW only appends columns, so views and functions a site built
-- on pg_stat_rdma, and its grants, stay.
CREATE FUNCTION pg_stat_get_rdma_sessions(
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
    OUT failed_over bool,
    OUT requested bool,
    OUT reason text
)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pg_stat_get_rdma'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE OR REPLACE VIEW pg_stat_rdma AS
    SELECT * FROM pg_stat_get_rdma_sessions();
DROP FUNCTION pg_stat_get_rdma();
GRANT SELECT ON pg_stat_rdma TO PUBLIC;

-- How sessions on pg_rdma addresses came out since the counters were last
-- reset: one row per outcome ('upgraded', 'no_device', 'memlock', ...).
CREATE FUNCTION pg_stat_get_rdma_outcomes(
    OUT outcome text,
    OUT sessions int8,
    OUT last_at timestamptz,
    OUT stats_reset timestamptz
)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pg_stat_get_rdma_outcomes'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE VIEW pg_stat_rdma_outcomes AS
    SELECT * FROM pg_stat_get_rdma_outcomes();

-- Per RDMA device: sessions that started on it, their failovers, and the
-- bytes of those that have ended.
CREATE FUNCTION pg_stat_get_rdma_devices(
    OUT device text,
    OUT sessions int8,
    OUT failovers int8,
    OUT bytes_sent int8,
    OUT bytes_received int8,
    OUT stats_reset timestamptz
)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pg_stat_get_rdma_devices'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE VIEW pg_stat_rdma_devices AS
    SELECT * FROM pg_stat_get_rdma_devices();

-- Counts, no addresses: readable by every role, as pg_stat_bgwriter is.
GRANT SELECT ON pg_stat_rdma_outcomes, pg_stat_rdma_devices TO PUBLIC;

-- Zeroes both views' counters; superuser only unless granted, as
-- pg_stat_reset_shared() is.
CREATE FUNCTION pg_stat_reset_rdma()
RETURNS void
AS 'MODULE_PATHNAME', 'pg_stat_reset_rdma'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
REVOKE ALL ON FUNCTION pg_stat_reset_rdma() FROM PUBLIC;
