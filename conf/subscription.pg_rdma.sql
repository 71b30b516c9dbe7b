-- pg_rdma — a logical replication subscription whose connection to the
-- publisher runs over RDMA. Run on the subscriber, after
--   CREATE PUBLICATION rdma_pub FOR TABLE ...;   on the publisher
-- and with the same tables created here:
--   psql -v publisher=10.99.0.1 -v port=5432 -v passfile=/var/lib/postgresql/.pgpass \
--        -f subscription.pg_rdma.sql
-- passfile: a password file (mode 0600) the subscriber's server processes can
-- read, with the publisher role's password. Both servers preload pg_rdma
-- (postgresql.pg_rdma.conf); the publisher has wal_level = logical and
-- pg_hba lines for the subscriber's address.
\set conninfo 'host=' :publisher ' port=' :port ' dbname=postgres user=postgres passfile=' :passfile ' application_name=rdma_sub with_rsocket=true'
CREATE SUBSCRIPTION rdma_sub CONNECTION :'conninfo' PUBLICATION rdma_pub;
