/* SPDX-License-Identifier: MIT */
/* client/conn.c: one connection to hipd: connecting, sending requests,
 * reading replies, and sharing the socket between threads.
 *
 * Threads (leader/follower). A mutex and a condition variable guard each
 * connection, and at most one thread at a time does socket I/O: the "io
 * owner" (io_busy). A thread that waits for a call whose reply has not come
 * becomes the io owner if nobody is; it polls the socket, reads, frames and
 * decodes replies, completes whichever calls they answer (its own or other
 * threads') and broadcasts. When its own call is done it gives the socket up
 * and another waiter takes over. Waiters that are not the io owner sleep on
 * the condition variable. The lock is never held across a blocking system
 * call.
 *
 * Sending. A sender also needs the socket. If the io owner is blocked in
 * poll() for replies, the sender wakes it through an eventfd; a polling owner
 * gives the socket up as soon as a sender waits, and waiters leave the socket
 * to senders, so requests are never stuck behind a long wait. The sender
 * writes the whole request itself; when the socket would block it also reads
 * replies, so that a client pipelining large requests cannot deadlock against
 * a daemon that waits for the client to read its replies.
 *
 * Lifetime. The connection is reference-counted: one reference for the
 * user's handle and one per call the user holds. hipd_close() fails all
 * pending calls with HIPD_EDISCONNECTED and drops the handle's reference; the
 * memory goes when the last call is waited for. A call that timed out is
 * "abandoned": the user no longer holds it, but it stays in the pending table
 * (its msgid stays reserved) until its late reply arrives and is discarded,
 * or the connection breaks.
 *
 * This file connects (the socket, the handshake), closes and holds the
 * settings. The rest is next to it, behind conn_internal.h: conn_error.c
 * (the thread-local last error), conn_call.c (deadlines, the pending
 * table, lifetimes, breaking, waiting), conn_recv.c (receiving and
 * framing), conn_send.c (sending, corking) and conn_decode.c (the common
 * decoders and parameters).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "conn_internal.h"

#define TABLE_MIN 64 /* buckets of the pending table */

static atomic_uint_fast64_t conn_serials;

/* ------------------------------------------------------------- versions */

const char *hipd_version(void)
{
  return PACKAGE_VERSION;
}

int hipd_protocol_version(void)
{
  return HIPD_PROTOCOL_VERSION;
}

/* ------------------------------------------------------------- the handshake
 */

/* Check the identity `hello` returns before keeping it: a peer that is not
 * hipd, or that settled on a protocol this library does not speak, fails
 * the handshake. */
static int hello_decode(hipd_call_t *call, const msgpack_object *result,
                        const conn_outs_t *outs)
{
  const msgpack_object *name = proto_map_get(result, "name");
  const msgpack_object *protocol = proto_map_get(result, "protocol");
  int64_t version;

  if (name == NULL || !proto_obj_streq(name, "hipd"))
    return conn_call_fail(call, HIPD_EPROTO,
                          "hello: the peer did not identify itself as hipd");
  if (protocol == NULL ||
      proto_obj_int(protocol, 1, hipd_protocol_version(), &version) < 0)
    return conn_call_fail(call, HIPD_EVERSION,
                          "hello: the daemon chose a protocol version this "
                          "client (protocol %d) does not speak",
                          hipd_protocol_version());
  return info_decode(call, result, outs);
}

/* hipd_connect() calls this with @p out NULL: the identity is checked, not
 * kept. */
int hipd_hello(hipd_conn_t *conn, hipd_info_t **out)
{
  hipd_call_t *c, *call;
  int err;

  if (out != NULL)
    *out = NULL;
  err = conn_call_begin(conn, "hello", 2, &c);
  if (err < 0)
    return err;
  msgpack_pack_int(&c->pk, hipd_protocol_version());
  proto_pack_cstr(&c->pk, conn->client_name);
  err = conn_call_send(c, hello_decode, CONN_OUTS(0, out), &call);
  return conn_sync(err, &call);
}

/* ------------------------------------------------------------ connecting */

/* The default socket path (see hipd_connect), malloc'd into *out. */
static int default_path(char **out)
{
  const char *env = getenv("HIPD_SOCKET");
  int n;

  if (env != NULL && *env != '\0')
    n = asprintf(out, "%s", env);
  else if (geteuid() == 0)
    n = asprintf(out, "/run/hipd/hipd.sock");
  else if ((env = getenv("XDG_RUNTIME_DIR")) != NULL && *env != '\0')
    n = asprintf(out, "%s/hipd.sock", env);
  else
    n = asprintf(out, "/run/user/%u/hipd.sock", (unsigned)geteuid());
  if (n < 0) {
    *out = NULL;
    return conn_fail(NULL, HIPD_ENOMEM, "out of memory");
  }
  return 0;
}

/* Create the connection and connect its socket to @p path (no handshake).
 * On failure the message is the thread's connect message. */
static int conn_open(const char *path, const char *client_name,
                     hipd_conn_t **out)
{
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  size_t len = strlen(path);
  hipd_conn_t *conn;
  pthread_condattr_t ca;
  int err, e, r;

  if (len == 0)
    return conn_fail(NULL, HIPD_EINVAL, "the socket path is empty");
  if (len >= sizeof(sa.sun_path))
    return conn_fail(NULL, HIPD_EINVAL,
                     "the socket path is too long (%zu bytes, at most %zu): %s",
                     len, sizeof(sa.sun_path) - 1, path);
  memcpy(sa.sun_path, path, len + 1);

  conn = calloc(1, sizeof(*conn));
  if (conn == NULL)
    return conn_fail(NULL, HIPD_ENOMEM, "out of memory");
  if (!msgpack_zone_init(&conn->zone, 4096)) {
    free(conn);
    return conn_fail(NULL, HIPD_ENOMEM, "out of memory");
  }
  pthread_mutex_init(&conn->lock, NULL);
  /* Timed waits use the monotonic clock, like the deadlines. */
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&conn->cond, &ca);
  pthread_condattr_destroy(&ca);
  conn->fd = -1;
  conn->wake_fd = -1;
  conn->busy_poll_us = conn_default_busy_poll();
  conn->refs = 1;
  conn->serial = atomic_fetch_add(&conn_serials, 1) + 1;
  conn->next_msgid = 1;
  proto_limits_default(&conn->limits);
  conn->table_size = TABLE_MIN;
  conn->table = calloc(TABLE_MIN, sizeof(*conn->table));
  /* The daemon keeps at most 63 bytes of the name: send no more. */
  conn->client_name = strndup(client_name, 63);
  if (conn->table == NULL || conn->client_name == NULL) {
    err = conn_fail(NULL, HIPD_ENOMEM, "out of memory");
    goto fail;
  }

  conn->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (conn->wake_fd < 0) {
    err = conn_fail(NULL, errno == ENOMEM ? HIPD_ENOMEM : HIPD_EIO,
                    "cannot create an eventfd: %s", strerror(errno));
    goto fail;
  }
  conn->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (conn->fd < 0) {
    err = conn_fail(NULL, errno == ENOMEM ? HIPD_ENOMEM : HIPD_EIO,
                    "cannot create a socket: %s", strerror(errno));
    goto fail;
  }
  do
    r = connect(conn->fd, (struct sockaddr *)&sa, sizeof(sa));
  while (r < 0 && errno == EINTR);
  if (r < 0) {
    e = errno;
    err = e == EACCES || e == EPERM ? HIPD_EPERM : HIPD_ECONNECT;
    conn_fail(NULL, err, "cannot connect to hipd at %s: %s%s", path,
              strerror(e),
              e == ENOENT || e == ECONNREFUSED ? " (is hipd running?)" : "");
    goto fail;
  }
  *out = conn;
  return 0;

fail:
  conn_destroy(conn);
  return err;
}

/* The ring.open answer: the entries the daemon took must be ours; its
 * doorbell is the one we sleep on. */
static int ring_decode(hipd_call_t *call, const msgpack_object *result,
                       const conn_outs_t *outs)
{
  conn_ring_t *r = outs->p[0];
  const msgpack_object *bell = proto_map_get(result, "doorbell");
  uint64_t entries = 0, slot = 0;

  if (proto_obj_uint(proto_map_get(result, "entries"), UINT32_MAX, &entries) !=
          0 ||
      proto_obj_uint(proto_map_get(result, "slot"), UINT32_MAX, &slot) != 0 ||
      entries != r->entries || slot != RING_SLOT)
    return conn_call_fail(call, HIPD_EPROTO,
                          "ring.open: the daemon answered another ring");
  r->futex =
      bell != NULL && bell->type == MSGPACK_OBJECT_STR &&
      bell->via.str.size == sizeof(RING_DOORBELL_FUTEX) - 1 &&
      memcmp(bell->via.str.ptr, RING_DOORBELL_FUTEX, bell->via.str.size) == 0;
  return 0;
}

/* After the handshake: set up the ring (proto/ring_layout.h), unless
 * $HIPD_RING is 0, with the futex doorbell unless $HIPD_RING_DOORBELL is
 * "socket". Without one (an older daemon, no memfd) the socket carries
 * everything, as it always can: nothing here fails the connect. */
static void ring_start(hipd_conn_t *conn)
{
  const char *env = getenv("HIPD_RING");
  const char *bell = getenv("HIPD_RING_DOORBELL");
  hipd_call_t *c, *call;
  conn_ring_t *r;
  int fd, err;

  if (env != NULL && strcmp(env, "0") == 0)
    return;
  if (conn_ring_map(RING_DEFAULT_ENTRIES, &r, &fd) != 0)
    return;
  if (bell == NULL || strcmp(bell, RING_DOORBELL_SOCKET) != 0)
    bell = RING_DOORBELL_FUTEX;
  if (conn_call_begin(conn, "ring.open", 2, &c) < 0) {
    close(fd);
    conn_ring_unmap(r);
    return;
  }
  msgpack_pack_uint32(&c->pk, r->entries);
  proto_pack_cstr(&c->pk, bell);
  c->send_fd = fd;
  err =
      conn_sync(conn_call_send(c, ring_decode, CONN_OUTS(0, r), &call), &call);
  close(fd); /* the daemon has its own; the mapping is all we need */
  if (err < 0) {
    conn_ring_unmap(r);
    return;
  }
  pthread_mutex_lock(&conn->lock);
  conn->ring = r;
  pthread_mutex_unlock(&conn->lock);
}

int hipd_connect2(const char *path, const char *client_name, hipd_conn_t **out)
{
  char *defpath = NULL;
  hipd_conn_t *conn = NULL;
  int err;

  if (out == NULL)
    return conn_fail(NULL, HIPD_EINVAL, "hipd_connect: out is NULL");
  *out = NULL;
  if (path == NULL) {
    err = default_path(&defpath);
    if (err < 0)
      return err;
    path = defpath;
  }
  if (client_name == NULL || *client_name == '\0')
    client_name = program_invocation_short_name;
  err = conn_open(path, client_name, &conn);
  if (err == HIPD_ECONNECT && defpath != NULL &&
      strcmp(defpath, "/run/hipd/hipd.sock") != 0 &&
      getenv("HIPD_SOCKET") == NULL && access(defpath, F_OK) != 0) {
    /* No daemon of the user's own: try the system daemon's socket (the
     * user may be in its group). */
    path = "/run/hipd/hipd.sock";
    err = conn_open(path, client_name, &conn);
  }
  if (err < 0)
    goto done;
  err = hipd_hello(conn, NULL);
  if (err < 0) {
    char msg[ERR_LEN];
    /* A daemon that hangs up at once (shutting down, too many sessions)
     * could not be connected to either. */
    if (err == HIPD_EDISCONNECTED)
      err = HIPD_ECONNECT;
    snprintf(msg, sizeof(msg), "handshake with hipd at %s failed: %s", path,
             hipd_last_error(conn));
    hipd_close(conn);
    conn_fail(NULL, err, "%s", msg);
    goto done;
  }
  ring_start(conn);
  *out = conn;

done:
  free(defpath);
  return err;
}

int hipd_connect(const char *path, hipd_conn_t **out)
{
  return hipd_connect2(path, NULL, out);
}

/* Pending calls complete at once with HIPD_EDISCONNECTED; the user still
 * owns each and frees it with hipd_wait(), which returns at once (even from
 * another thread). Each such call keeps the connection's memory alive, so
 * the last hipd_wait() frees it; abandoned calls are freed here. */
void hipd_close(hipd_conn_t *conn)
{
  if (conn == NULL)
    return;
  pthread_mutex_lock(&conn->lock);
  conn_break(conn, HIPD_EDISCONNECTED,
             "disconnected from hipd (the connection was closed by "
             "hipd_close)");
  pthread_mutex_unlock(&conn->lock);
  conn_unref(conn);
}

int hipd_fileno(hipd_conn_t *conn)
{
  return conn ? conn->fd : -1;
}

void hipd_set_busy_poll(hipd_conn_t *conn, int us)
{
  if (conn == NULL)
    return;
  pthread_mutex_lock(&conn->lock);
  conn->busy_poll_us = us > 0 ? (us > 1000000 ? 1000000 : us) : 0;
  pthread_mutex_unlock(&conn->lock);
}

void hipd_set_timeout(hipd_conn_t *conn, int timeout_ms)
{
  if (conn == NULL)
    return;
  pthread_mutex_lock(&conn->lock);
  conn->timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
  pthread_mutex_unlock(&conn->lock);
}
