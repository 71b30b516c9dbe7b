/*
 * libpq-rdma.h: what libpq_rdma.so tells a program about a connection's
 * transport, as PQsslInUse and PQsslAttribute tell it about TLS.
 *
 * The functions are declared weak: a program built with this header runs
 * with or without libpq_rdma.so (preloaded by pgrdma, or linked ahead of
 * libpq). Without it their addresses are null, so test one first:
 *
 *     if (PQrdmaInUse != NULL && PQrdmaInUse(conn))
 *         printf("on RDMA via %s\n", PQrdmaAttribute(conn, "device"));
 *
 * Attributes (NULL when there is nothing to say, or for a name not listed):
 *   "transport"  "rdma", "tcp" or "unix": what carries the session now
 *   "requested"  with_rsocket as it applied to the connection: "require",
 *                "true" (or its spelling as written), "false"
 *   "device"     the RDMA device, such as "mlx5_0", while on RDMA
 *   "reason"     why the session is not on RDMA: the fallback's reason as
 *                the warning on stderr said it, "not asked for: ...", or
 *                "the session moved to TCP: ..." after a failure
 * A string returned stays valid until PQfinish, as PQsslAttribute's do.
 * Connections a program started around the library's wrappers (libpq
 * called through dlsym or ctypes) answer PQrdmaInUse only. Build with
 * -I$(pg_config --includedir) (libpq-dev's libpq-fe.h).
 */
#ifndef LIBPQ_RDMA_H
#define LIBPQ_RDMA_H

#include <libpq-fe.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when the connection's session is carried over RDMA now, else 0. */
extern int PQrdmaInUse(const PGconn *conn) __attribute__((weak));
extern const char *PQrdmaAttribute(const PGconn *conn, const char *attribute_name) __attribute__((weak));
/* The attribute names, ending with NULL. */
extern const char *const *PQrdmaAttributeNames(const PGconn *conn) __attribute__((weak));

#ifdef __cplusplus
}
#endif

#endif /* LIBPQ_RDMA_H */
