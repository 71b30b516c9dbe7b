"""One asyncpg session (asyncio, non-blocking sockets, epoll) that checks
what a driver does: a transaction, a large result, COPY both ways, a
pipelined batch, TLS when asked, a cancel. Prints what the server says of
its transport. Usage: asyncpg_session.py HOST PORT PASSWORD SSL(on|off)"""
import asyncio
import ssl as ssl_module
import os
import sys

import asyncpg

# DRIVER_ROWS: rows of the large result (the fallback cases ask for fewer).
ROWS = int(os.environ.get("DRIVER_ROWS", "20000"))
WIDTH = 1000  # bytes per row of the large result: 20 MB by default


async def main(host, port, password, use_ssl):
    tls = False
    if use_ssl == "on":
        tls = ssl_module.create_default_context()
        tls.check_hostname = False
        tls.verify_mode = ssl_module.CERT_NONE
    conn = await asyncpg.connect(host=host, port=int(port), user="postgres", password=password,
                                 database="postgres", ssl=tls, timeout=60)
    try:
        try:
            transport = await conn.fetchval("select transport from pg_stat_rdma where pid = pg_backend_pid()")
        except asyncpg.exceptions.UndefinedTableError:
            transport = "none"  # a server without pg_rdma
        on_ssl = await conn.fetchval("select ssl from pg_stat_ssl where pid = pg_backend_pid()")
        # A transaction: rolled back, then committed.
        await conn.execute("create temp table t (id int, v text)")
        async with conn.transaction():
            await conn.execute("insert into t values (1, 'kept')")
        try:
            async with conn.transaction():
                await conn.execute("insert into t values (2, 'dropped')")
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        assert await conn.fetchval("select string_agg(v, ',') from t") == "kept"
        # A large result.
        rows = await conn.fetch("select repeat('x', $1) as v from generate_series(1, $2)", WIDTH, ROWS)
        assert len(rows) == ROWS and all(len(r["v"]) == WIDTH for r in rows)
        # COPY in and out.
        await conn.copy_records_to_table("t", records=[(i, "c%d" % i) for i in range(10000)])
        assert await conn.fetchval("select count(*) from t") == 10001
        out = []

        class Sink:
            async def __call__(self, data):
                out.append(data)
        await conn.copy_from_query("select * from t", output=Sink())
        assert sum(chunk.count(b"\n") for chunk in out) == 10001
        # A pipelined batch: executemany sends every Bind/Execute before reading.
        await conn.executemany("insert into t values ($1, $2)", [(i, "p") for i in range(2000)])
        assert await conn.fetchval("select count(*) from t where v = 'p'") == 2000
        # A cancel: asyncpg sends a CancelRequest on a connection of its own.
        try:
            await conn.execute("select pg_sleep(30)", timeout=1)
            raise AssertionError("pg_sleep was not cancelled")
        except asyncio.TimeoutError:
            pass
        assert await conn.fetchval("select 42") == 42
        print("asyncpg transport=%s ssl=%s" % (transport, "on" if on_ssl else "off"))
    finally:
        await conn.close()


asyncio.run(main(*sys.argv[1:5]))
