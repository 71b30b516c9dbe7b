-- The extension's SQL objects, with pg_rdma in shared_preload_libraries
-- and no RDMA session (this build serves none).

-- A database where 0.1 was installed: its pg_stat_rdma answers with the
-- new library, and ALTER EXTENSION brings it to the current version.
-- A view of the site's own on pg_stat_rdma, and a grant, survive it.
CREATE EXTENSION pg_rdma VERSION '0.1';
SELECT count(*) FROM pg_stat_rdma;
CREATE VIEW regress_rdma_sessions AS SELECT pid, transport FROM pg_stat_rdma;
CREATE ROLE regress_rdma_monitor;
GRANT SELECT ON pg_stat_rdma TO regress_rdma_monitor;
ALTER EXTENSION pg_rdma UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'pg_rdma';
SELECT count(*) FROM regress_rdma_sessions;
SELECT has_table_privilege('regress_rdma_monitor', 'pg_stat_rdma', 'SELECT') AS monitor_keeps_its_grant;
DROP VIEW regress_rdma_sessions;
DROP EXTENSION pg_rdma;
DROP ROLE regress_rdma_monitor;

CREATE EXTENSION pg_rdma;
SELECT extversion FROM pg_extension WHERE extname = 'pg_rdma';

-- pg_stat_rdma has the documented columns and types.
SELECT attname, format_type(atttypid, atttypmod) AS type
FROM pg_attribute
WHERE attrelid = 'pg_stat_rdma'::regclass AND attnum > 0
ORDER BY attnum;

-- Only live sessions are shown, and there are none.
SELECT count(*) FROM pg_stat_rdma;

-- The cumulative counters: a row for every outcome, none counted yet
-- (these sessions come over a Unix-domain socket, not a pg_rdma address).
SELECT attname, format_type(atttypid, atttypmod) AS type
FROM pg_attribute
WHERE attrelid = 'pg_stat_rdma_outcomes'::regclass AND attnum > 0
ORDER BY attnum;
SELECT outcome, sessions, last_at IS NULL AS never, stats_reset IS NOT NULL AS has_reset
FROM pg_stat_rdma_outcomes;
SELECT attname, format_type(atttypid, atttypmod) AS type
FROM pg_attribute
WHERE attrelid = 'pg_stat_rdma_devices'::regclass AND attnum > 0
ORDER BY attnum;
SELECT count(*) FROM pg_stat_rdma_devices;
-- The connections this server makes itself: none here.
SELECT attname, format_type(atttypid, atttypmod) AS type
FROM pg_attribute
WHERE attrelid = 'pg_stat_rdma_outgoing'::regclass AND attnum > 0
ORDER BY attnum;
SELECT count(*) FROM pg_stat_rdma_outgoing;
-- The reset moves stats_reset on.
SELECT stats_reset AS before_reset FROM pg_stat_rdma_outcomes LIMIT 1 \gset
SELECT pg_stat_reset_rdma();
SELECT bool_and(stats_reset > :'before_reset') AS reset_later, sum(sessions) AS sessions
FROM pg_stat_rdma_outcomes;

-- The parameters, their units, defaults and contexts.
SELECT name, setting, unit, boot_val, min_val, max_val, context
FROM pg_settings
WHERE name LIKE 'pg_rdma.%' AND name <> 'pg_rdma.client_library'
ORDER BY name;
-- The client library's default is where this build installs it.
SELECT setting LIKE '/%/libpq_rdma.so' AS installed_path, setting = boot_val AS is_default, context
FROM pg_settings
WHERE name = 'pg_rdma.client_library';
SHOW pg_rdma.listen_addresses;
SHOW pg_rdma.rx_buffer_size;
SHOW pg_rdma.keepalive_interval;
SHOW pg_rdma.keepalive_timeout;
SHOW pg_rdma.keepalive_min_interval;
SHOW pg_rdma.keepalive_max_timeout;
SHOW pg_rdma.busy_poll;
SHOW pg_rdma.connect_timeout;

-- The server's own check: this server offers RDMA on no address and says
-- so; the caps admit sessions; the limits' rows depend on the host.
SELECT item, target, status FROM pg_rdma_check_server()
WHERE item IN ('listen_address', 'setup_caps') ORDER BY item;
SELECT count(*) AS limit_rows FROM pg_rdma_check_server() WHERE item IN ('memlock', 'descriptors');

-- They are fixed at server start.
SET pg_rdma.keepalive_interval = '5s';
-- All but output batching, which is a session's choice.
SET pg_rdma.output_batching = off;
SHOW pg_rdma.output_batching;
RESET pg_rdma.output_batching;

-- The pg_rdma prefix is reserved: unknown names are refused.
SET pg_rdma.no_such_setting = 1;
SHOW pg_rdma.no_such_setting;

-- Loading the module again in a backend is harmless (it is preloaded).
LOAD 'pg_rdma';

-- Every role may read the views (a row of another role's session shows
-- its pid alone without pg_read_all_stats: tested with live sessions in
-- the guest); resetting the counters is for superusers and whom they grant.
CREATE ROLE regress_rdma_reader;
SET ROLE regress_rdma_reader;
SELECT count(*) FROM pg_stat_rdma;
SELECT count(*) > 0 AS outcomes FROM pg_stat_rdma_outcomes;
SELECT count(*) FROM pg_stat_rdma_devices;
SELECT count(*) FROM pg_stat_rdma_outgoing;
SELECT pg_stat_reset_rdma();
SELECT count(*) FROM pg_rdma_check_server();
RESET ROLE;
GRANT pg_monitor TO regress_rdma_reader;
SET ROLE regress_rdma_reader;
SELECT count(*) > 0 AS checked FROM pg_rdma_check_server();
RESET ROLE;
REVOKE pg_monitor FROM regress_rdma_reader;
GRANT EXECUTE ON FUNCTION pg_stat_reset_rdma() TO regress_rdma_reader;
SET ROLE regress_rdma_reader;
SELECT pg_stat_reset_rdma();
RESET ROLE;
REVOKE EXECUTE ON FUNCTION pg_stat_reset_rdma() FROM regress_rdma_reader;
DROP ROLE regress_rdma_reader;

DROP EXTENSION pg_rdma;
