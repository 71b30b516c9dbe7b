// One node-postgres session (npm's pg, with pg-copy-streams for COPY) on
// Node's event loop (libuv: non-blocking sockets, epoll), checking what a
// driver does: a transaction, a large result, COPY both ways, many queries
// in flight at once, TLS when asked, a cancel (a CancelRequest on a
// connection of its own), then sessions one after another in the same
// process, as a pool replaces its connections (libuv closes each socket
// with syscall(SYS_close), and the next socket gets its number). Prints
// what the server says of its transport.
// Usage: node node_session.js HOST PORT PASSWORD SSL(on|off)
'use strict';
const { Client } = require('pg');
const copyStreams = require('pg-copy-streams');
const { pipeline } = require('stream/promises');
const { Readable, Writable } = require('stream');
const assert = require('assert');

const ROWS = Number(process.env.DRIVER_ROWS || 20000);
const WIDTH = 1000; // bytes per row of the large result

const LATER_SESSIONS = 3;

async function transportOf(client) {
  try {
    return (await client.query('select transport from pg_stat_rdma where pid = pg_backend_pid()')).rows[0].transport;
  } catch (e) {
    assert.strictEqual(e.code, '42P01', String(e));
    return 'none'; // a server without pg_rdma
  }
}

async function main([host, port, password, ssl]) {
  const config = {
    host, port: Number(port), user: 'postgres', password, database: 'postgres',
    ssl: ssl === 'on' ? { rejectUnauthorized: false } : false, connectionTimeoutMillis: 60000,
  };
  const transport = await firstSession(config);
  for (let i = 0; i < LATER_SESSIONS; ++i) {
    const client = new Client(config);
    await client.connect();
    try {
      assert.strictEqual(await transportOf(client), transport, `session ${i + 2} of this process`);
      assert.strictEqual((await client.query('select $1::int as n', [i])).rows[0].n, i);
    } finally {
      await client.end();
    }
  }
  console.log(`node transport=${transport} ssl=${ssl === 'on' ? 'on' : 'off'}`);
}

async function firstSession(config) {
  const client = new Client(config);
  await client.connect();
  try {
    const transport = await transportOf(client);
    const onSsl = (await client.query('select ssl from pg_stat_ssl where pid = pg_backend_pid()')).rows[0].ssl;
    await client.query('create temp table t (id int, v text)');
    await client.query('begin');
    await client.query("insert into t values (2, 'dropped')");
    await client.query('rollback');
    await client.query('begin');
    await client.query("insert into t values (1, 'kept')");
    await client.query('commit');
    assert.strictEqual((await client.query("select string_agg(v, ',') as s from t")).rows[0].s, 'kept');
    const big = await client.query("select repeat('x', $1) as v from generate_series(1, $2)", [WIDTH, ROWS]);
    assert.strictEqual(big.rows.length, ROWS);
    assert.ok(big.rows.every((r) => r.v.length === WIDTH));
    const lines = [];
    for (let i = 0; i < 10000; ++i) lines.push(`${i}\tc${i}\n`);
    await pipeline(Readable.from(lines), client.query(copyStreams.from('copy t from stdin')));
    let newlines = 0;
    await pipeline(client.query(copyStreams.to('copy t to stdout')), new Writable({
      write(chunk, _encoding, done) {
        for (const byte of chunk) if (byte === 10) ++newlines;
        done();
      },
    }));
    assert.strictEqual(newlines, 10001);
    // Many queries in flight at once: the client queues and streams them.
    await Promise.all(Array.from({ length: 500 }, (_, i) => client.query("insert into t values ($1, 'p')", [i])));
    assert.strictEqual((await client.query("select count(*)::int as n from t where v = 'p'")).rows[0].n, 500);
    // A cancel, from another Client, while the query runs.
    const sleeping = client.query('select pg_sleep(30)');
    await new Promise((resolve) => setTimeout(resolve, 1000));
    new Client(config).cancel(client, client._getActiveQuery());
    await assert.rejects(sleeping, (e) => e.code === '57014');
    assert.strictEqual((await client.query('select 42 as n')).rows[0].n, 42);
    assert.strictEqual(onSsl, config.ssl !== false, 'TLS as asked');
    return transport;
  } finally {
    await client.end();
  }
}

main(process.argv.slice(2)).catch((e) => {
  console.error(e);
  process.exit(1);
});
