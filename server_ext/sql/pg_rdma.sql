-- The extension's SQL objects, with pg_rdma in shared_preload_libraries
-- and no RDMA session (this build serves none).
CREATE EXTENSION pg_rdma;

-- pg_stat_rdma has the documented columns and types.
SELECT attname, format_type(atttypid, atttypmod) AS type
FROM pg_attribute
WHERE attrelid = 'pg_stat_rdma'::regclass AND attnum > 0
ORDER BY attnum;

-- Only live sessions are shown, and there are none.
SELECT count(*) FROM pg_stat_rdma;

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

-- The rows hold client addresses: not for every role.
CREATE ROLE regress_rdma_reader;
SET ROLE regress_rdma_reader;
SELECT count(*) FROM pg_stat_rdma;
RESET ROLE;
GRANT pg_read_all_stats TO regress_rdma_reader;
SET ROLE regress_rdma_reader;
SELECT count(*) FROM pg_stat_rdma;
RESET ROLE;
DROP ROLE regress_rdma_reader;

DROP EXTENSION pg_rdma;
