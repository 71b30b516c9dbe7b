// Which of the backend's sends are a full output buffer, so that the
// transport may join them (MSG_MORE, transport/connection.hpp).
//
// PostgreSQL queues protocol messages in an 8 KiB buffer (pqcomm.c) and
// sends it in two cases: a message does not fit (inside pq_putmessage), or
// the backend asks for a flush (pq_flush: the end of a query step, before
// it waits, an error). Only a flush means the client may be waiting for
// these bytes; a full buffer means more follows at once. So a send made
// inside pq_putmessage goes with MSG_MORE, and the transport sends up to
// 64 KiB of them as one RDMA WRITE: a COPY out, a large result, pg_dump or
// a base backup then costs the client an eighth of the completions and
// wakeups. The next flush, read or epoll wait sends what is held
// (hook_epoll_wait covers sets other than the client's: pg_sleep, heavyweight
// locks, latches). Between two full buffers without such a wait (computing
// rows of a slow query, disk reads, an LWLock's semaphore) up to 64 KiB
// wait where TCP would already carry 8 KiB; pg_rdma.output_batching = off
// turns this off for a session.
//
// Works with TLS too: OpenSSL's write of the full buffer runs inside
// pq_putmessage. The walsender's WAL (pq_putmessage_noblock, which grows
// the buffer instead of sending) is not affected.
#pragma once

namespace pg_rdma::server {

// Wraps PqCommMethods (PostgreSQL's socket methods: a session is decided
// in its first read, after pq_init) once this backend's session is on
// RDMA. Idempotent.
void install_output_batching() noexcept;

// True while PostgreSQL is inside pq_putmessage: a send now is a full buffer.
bool output_buffer_full() noexcept;

}  // namespace pg_rdma::server
