-- pg_rdma — a postgres_fdw server whose remote sessions run over RDMA.
--   psql -v remote=10.99.0.1 -v port=5432 -v password=... -f postgres_fdw.pg_rdma.sql
-- then CREATE FOREIGN TABLE ... SERVER rdma_remote, or IMPORT FOREIGN SCHEMA.
-- with_rsocket is accepted as a server option because pg_rdma (preloaded)
-- adds it to the options libpq reports; 'require' fails the query when RDMA
-- is impossible, 'true' falls back to TCP.
CREATE EXTENSION IF NOT EXISTS postgres_fdw;
CREATE SERVER rdma_remote FOREIGN DATA WRAPPER postgres_fdw
    OPTIONS (host :'remote', port :'port', dbname 'postgres', with_rsocket 'true');
CREATE USER MAPPING FOR CURRENT_USER SERVER rdma_remote
    OPTIONS (user 'postgres', password :'password');
