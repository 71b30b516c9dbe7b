"""One psycopg 3 session in its pure-Python mode (libpq through ctypes,
around libpq_rdma.so's wrappers), checking what a driver does: a
transaction, a large result, COPY both ways, pipeline mode, TLS when
asked, a cancel. Prints what the server says of its transport.
Usage: psycopg_session.py HOST PORT PASSWORD SSL(on|off)"""
import os
import sys
import threading
import time

import psycopg
import psycopg.pq

# DRIVER_ROWS: rows of the large result (the fallback cases ask for fewer).
ROWS = int(os.environ.get("DRIVER_ROWS", "20000"))
WIDTH = 1000

host, port, password, use_ssl = sys.argv[1:5]
assert psycopg.pq.__impl__ == "python", psycopg.pq.__impl__
conninfo = "host=%s port=%s user=postgres password=%s dbname=postgres connect_timeout=60 sslmode=%s" % (
    host, port, password, "require" if use_ssl == "on" else "disable")
with psycopg.connect(conninfo) as conn:
    try:
        transport = conn.execute("select transport from pg_stat_rdma where pid = pg_backend_pid()").fetchone()[0]
    except psycopg.errors.UndefinedTable:
        transport = "none"  # a server without pg_rdma
        conn.rollback()
    on_ssl = conn.execute("select ssl from pg_stat_ssl where pid = pg_backend_pid()").fetchone()[0]
    conn.execute("create temp table t (id int, v text)")
    conn.commit()
    with conn.transaction():
        conn.execute("insert into t values (1, 'kept')")
    try:
        with conn.transaction():
            conn.execute("insert into t values (2, 'dropped')")
            raise RuntimeError("roll back")
    except RuntimeError:
        pass
    assert conn.execute("select string_agg(v, ',') from t").fetchone()[0] == "kept"
    rows = conn.execute("select repeat('x', %s) from generate_series(1, %s)", (WIDTH, ROWS)).fetchall()
    assert len(rows) == ROWS and all(len(r[0]) == WIDTH for r in rows)
    with conn.cursor() as cur:
        with cur.copy("copy t from stdin") as copy:
            for i in range(10000):
                copy.write_row((i, "c%d" % i))
        lines = 0
        with cur.copy("copy t to stdout") as copy:
            for chunk in copy:
                lines += bytes(chunk).count(b"\n")
        assert lines == 10001, lines
    with conn.pipeline():
        for i in range(2000):
            conn.execute("insert into t values (%s, 'p')", (i,))
    assert conn.execute("select count(*) from t where v = 'p'").fetchone()[0] == 2000
    conn.commit()
    # A cancel from another thread, while the query runs.
    threading.Timer(1.0, conn.cancel).start()
    started = time.monotonic()
    try:
        conn.execute("select pg_sleep(30)")
        raise AssertionError("pg_sleep was not cancelled")
    except psycopg.errors.QueryCanceled:
        pass
    conn.rollback()
    assert conn.execute("select 42").fetchone()[0] == 42
    print("psycopg transport=%s ssl=%s" % (transport, "on" if on_ssl else "off"))
