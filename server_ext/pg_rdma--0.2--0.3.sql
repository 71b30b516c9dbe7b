/* server_ext/pg_rdma--0.2--0.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_rdma UPDATE TO '0.3'" to load this file. \quit

-- What a DBA checks before blaming the network: each address of
-- pg_rdma.listen_addresses against the RDMA port behind it, the
-- postmaster's memory lock and descriptor limits against what a session
-- needs, the caps on sessions in setup, the client library for the
-- server's own connections. One row per check; status 'ok', 'warning' or
-- 'problem', and for the last two what to do. `pgrdma doctor --server`
-- prints it.
CREATE FUNCTION pg_rdma_check_server(
    OUT item text,
    OUT target text,
    OUT status text,
    OUT detail text
)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pg_rdma_check_server'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

-- It reads the server's limits and settings: superusers, and roles of
-- pg_monitor, as pg_ls_logdir() is.
REVOKE ALL ON FUNCTION pg_rdma_check_server() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pg_rdma_check_server() TO pg_monitor;

-- The libpq connections this server makes itself (the walreceiver, logical
-- replication workers, postgres_fdw, dblink), whichever transport they
-- took: one row per connection, by the pid of the process that made it.
-- A view of its own, so that pg_stat_rdma keeps one row per session,
-- joined on pid as pg_stat_ssl is.
CREATE FUNCTION pg_stat_get_rdma_outgoing(
    OUT pid int4,
    OUT remote_addr inet,
    OUT remote_port int4,
    OUT transport text,
    OUT device text,
    OUT requested text,
    OUT reason text,
    OUT connected_at timestamptz
)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pg_stat_get_rdma_outgoing'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE VIEW pg_stat_rdma_outgoing AS
    SELECT * FROM pg_stat_get_rdma_outgoing();
-- Every role sees its own processes' connections; details of the others'
-- need pg_read_all_stats (the function hides them).
GRANT SELECT ON pg_stat_rdma_outgoing TO PUBLIC;
