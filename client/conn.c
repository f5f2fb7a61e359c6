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
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"

#define RECV_CHUNK ((size_t)64 << 10) /* least free space offered to recv */
#define RECV_KEEP ((size_t)1 << 20)   /* larger idle buffers are freed */
#define BODY_REF_SIZE 4096            /* params this large are not copied */
#define BODY_CHUNK_SIZE 1024          /* first chunk of a request's body */
#define TABLE_MIN 64                  /* buckets of the pending table */
#define STACK_IOV 16         /* iovecs a request sends from the stack */
#define ERROR_MAX (64 << 10) /* longest message kept from the daemon */
#define NO_DEADLINE INT64_C(-1)
#define CORK_FLUSH ((size_t)64 << 10)  /* corked bytes that force a write */
#define DIRECT_MIN ((size_t)256 << 10) /* replies received in place */

struct hipd_conn {
  pthread_mutex_t lock;
  pthread_cond_t cond;   /* a call completed or the socket was given up */
  unsigned refs;         /* the user's handle + the calls the user holds */
  uint64_t serial;       /* tells this connection from a later one at the
                            same address, for the thread-local messages */
  int fd;                /* the socket; closed only when the memory goes */
  int wake_fd;           /* eventfd: makes a polling io owner let a sender in */
  char *client_name;     /* sent in hello */
  int timeout_ms;        /* per wait; 0: none */
  int busy_poll_us;      /* spin this long for a reply before sleeping */
  int broken;            /* 0, or the code the pending calls failed with */
  char broken_msg[512];  /* and their message */
  int io_busy;           /* a thread owns the socket */
  unsigned send_waiters; /* threads waiting for the socket to send */
  uint32_t next_msgid;   /* wraps; ids still pending are skipped */
  hipd_call_t **table;   /* pending and abandoned calls, by msgid */
  size_t table_size;     /* buckets, a power of 2 */
  size_t npending;       /* calls in the table */
  /* The receive side, used only by the io owner. */
  uint8_t *rbuf;         /* bytes received and not yet dispatched */
  size_t rlen;           /* bytes in rbuf */
  size_t rcap;           /* size of rbuf */
  size_t rneed;          /* the message at rbuf needs at least this much */
  proto_limits_t limits; /* for replies */
  msgpack_zone zone;     /* objects of the reply being dispatched */
  /* Corked requests (hipd_cork), written together later. */
  unsigned corked; /* hipd_cork() nesting depth */
  char *obuf;      /* whole requests not yet written */
  size_t olen, ocap;
  /* A large reply being received straight into its caller's buffer (the
   * io owner's, under the lock): its call, out of the table. */
  hipd_call_t *dcall;
  uint8_t *ddst; /* where the payload goes; NULL: discarded (abandoned) */
  size_t dlen, dgot;
};

/* ------------------------------------------------------------- versions */

const char *hipd_version(void)
{
  return PACKAGE_VERSION;
}

int hipd_protocol_version(void)
{
  return HIPD_PROTOCOL_VERSION;
}

/* ------------------------------------------------ thread-local messages */

/* The last error message of the calling thread, per connection. A few slots
 * so that a thread using several connections keeps each one's message; the
 * slot set longest ago is reused. Slot tags are (address, serial) so that a
 * new connection at a freed one's address does not inherit its message. The
 * NULL connection holds connect failures.
 *
 * A message fits the slot's own buffer, or else (a compiler's log) goes to
 * a heap buffer of the slot, kept for the thread's next long message and
 * freed when the thread exits. The thread-local part stays small: it comes
 * out of every thread's stack. */
#define ERR_SLOTS 4
#define ERR_LEN 1024
#define ERR_LONG_MAX (ERROR_MAX + 1024) /* with a method name in front */

struct err_slot {
  const hipd_conn_t *conn;
  uint64_t serial;
  uint64_t stamp;  /* when it was last set; 0: never */
  const char *msg; /* short or long */
  char *long_msg;  /* malloc'd, ERR_LONG_MAX bytes, or NULL */
  char short_msg[ERR_LEN];
};

static _Thread_local struct err_slot err_slots[ERR_SLOTS];
static _Thread_local uint64_t err_clock;
static atomic_uint_fast64_t conn_serials;
static pthread_key_t err_key; /* frees a thread's long buffers at exit */
static int err_key_ok;        /* err_key was created */
static pthread_once_t err_once = PTHREAD_ONCE_INIT;

/* A thread exits (the key's value is its err_slots). */
static void err_slots_free_cb(void *arg)
{
  struct err_slot *slots = arg;

  for (int i = 0; i < ERR_SLOTS; i++) {
    free(slots[i].long_msg);
    slots[i].long_msg = NULL;
    slots[i].msg = slots[i].short_msg;
  }
}

static void err_key_create(void)
{
  err_key_ok = pthread_key_create(&err_key, err_slots_free_cb) == 0;
}

/* Unloaded: threads must not call into this library at exit any more (their
 * long buffers leak instead). */
__attribute__((destructor)) static void err_key_delete(void)
{
  if (err_key_ok)
    pthread_key_delete(err_key);
}

/* The long buffer of slot @p s, allocated once per thread and slot.
 * @return it, or NULL (the message is then truncated to the short one). */
static char *err_long_buffer(struct err_slot *s)
{
  if (s->long_msg != NULL)
    return s->long_msg;
  pthread_once(&err_once, err_key_create);
  if (!err_key_ok || pthread_setspecific(err_key, err_slots) != 0)
    return NULL;
  s->long_msg = malloc(ERR_LONG_MAX);
  return s->long_msg;
}

static struct err_slot *err_slot_find(const hipd_conn_t *conn)
{
  uint64_t serial = conn ? conn->serial : 0;

  for (int i = 0; i < ERR_SLOTS; i++)
    if (err_slots[i].stamp && err_slots[i].conn == conn &&
        err_slots[i].serial == serial)
      return &err_slots[i];
  return NULL;
}

static void err_setv(const hipd_conn_t *conn, const char *fmt, va_list ap)
{
  struct err_slot *s = err_slot_find(conn);
  char *buf;
  va_list ap2;
  int n;

  if (s == NULL) {
    s = &err_slots[0];
    for (int i = 1; i < ERR_SLOTS; i++)
      if (err_slots[i].stamp < s->stamp)
        s = &err_slots[i];
    s->conn = conn;
    s->serial = conn ? conn->serial : 0;
  }
  s->stamp = ++err_clock;
  va_copy(ap2, ap);
  n = vsnprintf(s->short_msg, sizeof(s->short_msg), fmt, ap);
  s->msg = s->short_msg;
  if (n >= (int)sizeof(s->short_msg) && (buf = err_long_buffer(s)) != NULL) {
    vsnprintf(buf, ERR_LONG_MAX, fmt, ap2);
    s->msg = buf;
  }
  va_end(ap2);
}

static void err_set(const hipd_conn_t *conn, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void err_set(const hipd_conn_t *conn, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  err_setv(conn, fmt, ap);
  va_end(ap);
}

/* hipd_last_error(NULL) gives the message of the thread's last failed
 * hipd_connect(), which has no connection to hang it on. */
const char *hipd_last_error(hipd_conn_t *conn)
{
  struct err_slot *s = err_slot_find(conn);

  return s ? s->msg : "";
}

int conn_fail(hipd_conn_t *conn, int code, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  err_setv(conn, fmt, ap);
  va_end(ap);
  return code;
}

/* ----------------------------------------------------------------- time */

/* Deadlines are CLOCK_MONOTONIC nanoseconds; NO_DEADLINE waits forever and
 * a deadline of 0 has always passed (a poll). */
/* $HIPD_BUSY_POLL_US, else 20 us on machines with 8 or more CPUs (where a
 * spinning waiter takes no CPU another thread needs), else 0. */
static int default_busy_poll(void)
{
  const char *env = getenv("HIPD_BUSY_POLL_US");

  if (env != NULL && *env != '\0') {
    long v = strtol(env, NULL, 10);
    return v > 0 ? (v > 1000000 ? 1000000 : (int)v) : 0;
  }
  return sysconf(_SC_NPROCESSORS_ONLN) >= 8 ? 20 : 0;
}

static int64_t now_ns(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t deadline_after(int timeout_ms)
{
  return timeout_ms > 0 ? now_ns() + (int64_t)timeout_ms * 1000000
                        : NO_DEADLINE;
}

/* Milliseconds left for poll(), rounded up so that poll never returns just
 * before the deadline; -1 for none. */
static int remaining_ms(int64_t deadline)
{
  int64_t left;

  if (deadline == NO_DEADLINE)
    return -1;
  left = deadline - now_ns();
  if (left <= 0)
    return 0;
  left = (left + 999999) / 1000000;
  return left > INT_MAX ? INT_MAX : (int)left;
}

/* Wait on the connection's condition variable (lock held) until signalled
 * or @p deadline. @return 0, or HIPD_ETIMEDOUT once the deadline passed. */
static int cond_wait_until(hipd_conn_t *conn, int64_t deadline)
{
  struct timespec ts;

  if (deadline == NO_DEADLINE) {
    pthread_cond_wait(&conn->cond, &conn->lock);
    return 0;
  }
  ts.tv_sec = deadline / 1000000000;
  ts.tv_nsec = deadline % 1000000000;
  if (pthread_cond_timedwait(&conn->cond, &conn->lock, &ts) == ETIMEDOUT)
    return HIPD_ETIMEDOUT;
  return 0;
}

/* -------------------------------------------------------- pending table */

static hipd_call_t **table_bucket(const hipd_conn_t *conn, uint32_t msgid)
{
  return &conn->table[msgid & (conn->table_size - 1)];
}

static hipd_call_t *table_find(const hipd_conn_t *conn, uint32_t msgid)
{
  hipd_call_t *c = *table_bucket(conn, msgid);

  while (c != NULL && c->msgid != msgid)
    c = c->hnext;
  return c;
}

/* Double the buckets when chains get long. Out of memory just keeps the
 * chains long. */
static void table_grow(hipd_conn_t *conn)
{
  size_t size = conn->table_size * 2;
  hipd_call_t **table = calloc(size, sizeof(*table));

  if (table == NULL)
    return;
  for (size_t i = 0; i < conn->table_size; i++) {
    hipd_call_t *c = conn->table[i], *next;
    for (; c != NULL; c = next) {
      next = c->hnext;
      c->hnext = table[c->msgid & (size - 1)];
      table[c->msgid & (size - 1)] = c;
    }
  }
  free(conn->table);
  conn->table = table;
  conn->table_size = size;
}

static void table_insert(hipd_conn_t *conn, hipd_call_t *call)
{
  hipd_call_t **b;

  if (conn->npending >= 2 * conn->table_size)
    table_grow(conn);
  b = table_bucket(conn, call->msgid);
  call->hnext = *b;
  *b = call;
  conn->npending++;
}

static hipd_call_t *table_remove(hipd_conn_t *conn, uint32_t msgid)
{
  hipd_call_t **p = table_bucket(conn, msgid), *c;

  for (; (c = *p) != NULL; p = &c->hnext) {
    if (c->msgid == msgid) {
      *p = c->hnext;
      c->hnext = NULL;
      conn->npending--;
      return c;
    }
  }
  return NULL;
}

/* The next free msgid. Ids wrap at 2^32; one still pending (a slow or
 * abandoned call) is skipped so that replies are never confused. */
static uint32_t msgid_next(hipd_conn_t *conn)
{
  uint32_t id;

  do
    id = conn->next_msgid++;
  while (table_find(conn, id) != NULL);
  return id;
}

/* ---------------------------------------------------------------- calls */

static void conn_destroy(hipd_conn_t *conn)
{
  if (conn->fd >= 0)
    close(conn->fd);
  if (conn->wake_fd >= 0)
    close(conn->wake_fd);
  free(conn->table);
  free(conn->rbuf);
  free(conn->obuf);
  free(conn->client_name);
  msgpack_zone_destroy(&conn->zone);
  pthread_cond_destroy(&conn->cond);
  pthread_mutex_destroy(&conn->lock);
  free(conn);
}

/* Drop a reference (lock not held); the last one frees the connection. */
static void conn_unref(hipd_conn_t *conn)
{
  unsigned refs;

  pthread_mutex_lock(&conn->lock);
  refs = --conn->refs;
  pthread_mutex_unlock(&conn->lock);
  if (refs == 0)
    conn_destroy(conn);
}

/* Free a call's memory (its body is already gone). Touches no connection. */
static void call_destroy(hipd_call_t *call)
{
  free(call->error);
  free(call);
}

static void call_failv(hipd_call_t *call, int code, const char *fmt, va_list ap)
{
  call->result = code;
  free(call->error);
  if (vasprintf(&call->error, fmt, ap) < 0)
    call->error = NULL;
}

int conn_call_fail(hipd_call_t *call, int code, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  call_failv(call, code, fmt, ap);
  va_end(ap);
  return code;
}

/* Wake an io owner blocked in poll() (harmless when there is none). */
static void wake_owner(hipd_conn_t *conn)
{
  uint64_t one = 1;
  ssize_t n = write(conn->wake_fd, &one, sizeof(one));

  (void)n; /* EAGAIN: a wake-up is already pending, which is enough. */
}

static void wake_drain(hipd_conn_t *conn)
{
  uint64_t v;
  ssize_t n = read(conn->wake_fd, &v, sizeof(v));

  (void)n;
}

/*
 * Break the connection (lock held): the first reason sticks. Every pending
 * call completes with @p code and the printf-style message; abandoned calls
 * are freed; the socket is shut down so that the daemon sees the end and any
 * thread blocked on it wakes. Later calls fail with HIPD_EDISCONNECTED.
 */
static void conn_break(hipd_conn_t *conn, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void conn_break(hipd_conn_t *conn, int code, const char *fmt, ...)
{
  va_list ap;

  if (conn->broken)
    return;
  conn->broken = code;
  va_start(ap, fmt);
  vsnprintf(conn->broken_msg, sizeof(conn->broken_msg), fmt, ap);
  va_end(ap);
  shutdown(conn->fd, SHUT_RDWR);
  for (size_t i = 0; i < conn->table_size; i++) {
    hipd_call_t *c = conn->table[i], *next;
    conn->table[i] = NULL;
    for (; c != NULL; c = next) {
      next = c->hnext;
      c->hnext = NULL;
      if (c->state == CALL_ABANDONED) {
        call_destroy(c);
        continue;
      }
      conn_call_fail(c, code, "%s", conn->broken_msg);
      c->state = CALL_DONE;
    }
  }
  conn->npending = 0;
  if (conn->dcall != NULL) {
    hipd_call_t *c = conn->dcall;
    conn->dcall = NULL;
    if (c->state == CALL_ABANDONED) {
      call_destroy(c);
    } else {
      conn_call_fail(c, code, "%s", conn->broken_msg);
      c->state = CALL_DONE;
    }
  }
  wake_owner(conn);
  pthread_cond_broadcast(&conn->cond);
}

/* The message for a call made after the connection broke (lock held). */
static void broken_message(const hipd_conn_t *conn, char *buf, size_t size)
{
  if (conn->broken == HIPD_EDISCONNECTED)
    snprintf(buf, size, "%s", conn->broken_msg);
  else
    snprintf(buf, size, "disconnected from hipd (after an error: %s)",
             conn->broken_msg);
}

/* ------------------------------------------------------------- receiving */

/* Complete @p call from the error object of its response (lock held). */
static void call_complete_error(hipd_call_t *call, const msgpack_object *err)
{
  const char *msg;
  size_t len;
  int code;

  if (proto_error_decode(err, &code, &msg, &len) < 0) {
    conn_call_fail(call, HIPD_EPROTO,
                   "%s: the daemon replied with a malformed error object",
                   call->method);
    return;
  }
  if (len > ERROR_MAX)
    len = ERROR_MAX;
  if (code >= 0)
    conn_call_fail(call, HIPD_EPROTO,
                   "%s: the daemon replied with error code %d: %.*s",
                   call->method, code, (int)len, msg);
  else if (len == 0)
    conn_call_fail(call, code, "%s: %s", call->method, hipd_strerror(code));
  else
    conn_call_fail(call, code, "%.*s", (int)len, msg);
}

/*
 * Dispatch one complete message buf[0, len) (lock held): complete the call
 * it answers, running its decoder. Notifications are ignored (none is
 * defined yet). @return 0, or a negative code after breaking the connection
 * on a protocol violation.
 */
static int conn_dispatch(hipd_conn_t *conn, const uint8_t *buf, size_t len)
{
  const char *reason = "";
  hipd_call_t *call;
  proto_msg_t msg;
  int err;

  err = proto_msg_decode(buf, len, &conn->zone, &msg, &reason);
  if (err == HIPD_ENOMEM) {
    conn_break(conn, err, "out of memory decoding a reply of %zu bytes", len);
    return err;
  }
  if (err < 0) {
    conn_break(conn, err, "protocol error from hipd: %s", reason);
    return err;
  }
  if (msg.type == PROTO_NOTIFY)
    return 0;
  if (msg.type != PROTO_RESPONSE) {
    conn_break(conn, HIPD_EPROTO,
               "protocol error from hipd: the daemon sent a request (%.*s)",
               (int)msg.method_len, msg.method);
    return HIPD_EPROTO;
  }
  call = table_remove(conn, msg.msgid);
  if (call == NULL) {
    conn_break(conn, HIPD_EPROTO,
               "protocol error from hipd: reply to unknown request id %" PRIu32,
               msg.msgid);
    return HIPD_EPROTO;
  }
  if (call->state == CALL_ABANDONED) {
    call_destroy(call);
    return 0;
  }
  if (msg.error->type != MSGPACK_OBJECT_NIL) {
    call_complete_error(call, msg.error);
  } else {
    call->result = 0;
    if (call->decode != NULL)
      call->result = call->decode(call, msg.result, &call->outs);
    if (call->result < 0 && call->error == NULL)
      conn_call_fail(call, call->result, "%s: %s", call->method,
                     hipd_strerror(call->result));
  }
  call->state = CALL_DONE;
  pthread_cond_broadcast(&conn->cond);
  return 0;
}

/*
 * Frame and dispatch every complete message in the receive buffer (io owner,
 * lock held), then move the incomplete rest to the front. Scanning restarts
 * only once rneed bytes are there, so a large reply is not rescanned for
 * every read. @return 0 or the negative code the connection broke with.
 */
/* Read a msgpack uint at @p p (at most @p n bytes). @return its length in
 * bytes, or 0 if it is not one or incomplete. */
static size_t read_uint(const uint8_t *p, size_t n, uint64_t *v)
{
  size_t len;

  if (n < 1)
    return 0;
  if (p[0] <= 0x7f) {
    *v = p[0];
    return 1;
  }
  len = p[0] == 0xcc ? 1 : p[0] == 0xcd ? 2 : p[0] == 0xce ? 4 : 0;
  if (len == 0 || n < 1 + len)
    return 0;
  *v = 0;
  for (size_t i = 1; i <= len; i++)
    *v = *v << 8 | p[i];
  return 1 + len;
}

/*
 * An incomplete message at rbuf + pos that is the successful reply to a
 * call waiting for exactly that many bytes ([1, msgid, nil, bin]): take
 * the call out of the table, copy the payload received so far into its
 * buffer and receive the rest there (direct_recv). Lock held, io owner.
 * @return 1 if so, 0 to go on the usual way.
 */
static int direct_start(hipd_conn_t *conn, size_t pos)
{
  const uint8_t *p = conn->rbuf + pos;
  size_t n = conn->rlen - pos, off = 2, k, len = 0;
  uint64_t msgid, blen = 0;
  hipd_call_t *call;

  if (conn->dcall != NULL || n < 3 || p[0] != 0x94 || p[1] != 0x01)
    return 0;
  if ((k = read_uint(p + off, n - off, &msgid)) == 0 || msgid > UINT32_MAX)
    return 0;
  off += k;
  if (n < off + 2 || p[off] != 0xc0)
    return 0;
  off++;
  if (p[off] == 0xc4)
    len = 1;
  else if (p[off] == 0xc5)
    len = 2;
  else if (p[off] == 0xc6)
    len = 4;
  if (len == 0 || n < off + 1 + len)
    return 0;
  for (size_t i = 1; i <= len; i++)
    blen = blen << 8 | p[off + i];
  off += 1 + len;
  call = table_find(conn, (uint32_t)msgid);
  if (call == NULL || call->state != CALL_PENDING || call->direct_dst == NULL ||
      call->direct_len != blen || n - off > blen)
    return 0;
  table_remove(conn, (uint32_t)msgid);
  memcpy(call->direct_dst, p + off, n - off);
  conn->dcall = call;
  conn->ddst = call->direct_dst;
  conn->dlen = blen;
  conn->dgot = n - off;
  conn->rneed = 0;
  return 1;
}

/* io_recv() for a reply received in place: read its next bytes into the
 * caller's buffer, and complete the call with the last. */
static ssize_t direct_recv(hipd_conn_t *conn)
{
  static _Thread_local uint8_t sink[64 << 10]; /* an abandoned call's bytes */
  hipd_call_t *call;
  ssize_t n;
  int e;

  pthread_mutex_lock(&conn->lock);
  call = conn->dcall;
  if (call == NULL) {
    /* The connection broke meanwhile and failed the call. */
    n = conn->broken;
    pthread_mutex_unlock(&conn->lock);
    return n;
  }
  if (call->state == CALL_ABANDONED)
    conn->ddst = NULL; /* its buffer may be gone: drop the rest */
  do {
    size_t want = conn->dlen - conn->dgot;
    if (conn->ddst == NULL && want > sizeof(sink))
      want = sizeof(sink);
    n = recv(conn->fd, conn->ddst ? conn->ddst + conn->dgot : sink, want,
             MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  e = errno;
  if (n < 0 && (e == EAGAIN || e == EWOULDBLOCK)) {
    pthread_mutex_unlock(&conn->lock);
    return 0;
  }
  if (n <= 0) {
    conn_break(conn, HIPD_EDISCONNECTED, "disconnected from hipd (%s)",
               n == 0 ? "the daemon closed the connection" : strerror(e));
    n = conn->broken;
    pthread_mutex_unlock(&conn->lock);
    return n;
  }
  conn->dgot += (size_t)n;
  if (conn->dgot == conn->dlen) {
    conn->dcall = NULL;
    if (call->state == CALL_ABANDONED) {
      call_destroy(call);
    } else {
      call->result = 0;
      call->state = CALL_DONE;
      pthread_cond_broadcast(&conn->cond);
    }
  }
  pthread_mutex_unlock(&conn->lock);
  return n;
}

static int conn_input(hipd_conn_t *conn)
{
  size_t pos = 0;
  int err = 0;

  while (!conn->broken && pos < conn->rlen && conn->rlen - pos >= conn->rneed) {
    const char *reason = "";
    size_t need = 0;
    long long n = proto_frame_scan(&conn->limits, conn->rbuf + pos,
                                   conn->rlen - pos, &need, &reason);
    if (n == 0) {
      conn->rneed = need;
      if (need >= DIRECT_MIN && direct_start(conn, pos))
        conn->rlen = pos; /* the rest of the reply bypasses rbuf */
      break;
    }
    if (n < 0) {
      conn_break(conn, HIPD_EPROTO, "protocol error from hipd: %s", reason);
      err = HIPD_EPROTO;
      break;
    }
    conn->rneed = 0;
    err = conn_dispatch(conn, conn->rbuf + pos, (size_t)n);
    msgpack_zone_clear(&conn->zone);
    if (err < 0)
      break;
    pos += (size_t)n;
  }
  if (conn->broken) {
    /* Nothing more will be dispatched; whatever is left is dropped. */
    conn->rlen = 0;
    conn->rneed = 0;
    err = conn->broken;
  } else if (pos > 0) {
    memmove(conn->rbuf, conn->rbuf + pos, conn->rlen - pos);
    conn->rlen -= pos;
  }
  if (conn->rlen == 0 && conn->rcap > RECV_KEEP) {
    free(conn->rbuf);
    conn->rbuf = NULL;
    conn->rcap = 0;
  }
  return err;
}

/* Make room for the next recv (io owner): RECV_CHUNK bytes free, and the
 * whole of the message being assembled. @return 0 or HIPD_ENOMEM. */
static int rbuf_reserve(hipd_conn_t *conn)
{
  size_t want = conn->rlen + RECV_CHUNK, cap;
  uint8_t *p;

  if (conn->rneed > want)
    want = conn->rneed;
  if (want <= conn->rcap)
    return 0;
  cap = conn->rcap * 2;
  if (cap < want)
    cap = want;
  p = realloc(conn->rbuf, cap);
  if (p == NULL)
    return HIPD_ENOMEM;
  conn->rbuf = p;
  conn->rcap = cap;
  return 0;
}

/*
 * Read what the socket has, without blocking, and dispatch the complete
 * replies (io owner, lock not held). @return the bytes read (> 0), 0 if none
 * were ready, or a negative code once the connection is broken (end of
 * stream, reset, protocol violation).
 */
static ssize_t io_recv(hipd_conn_t *conn)
{
  ssize_t n;
  int err, e;

  pthread_mutex_lock(&conn->lock);
  n = conn->dcall != NULL;
  pthread_mutex_unlock(&conn->lock);
  if (n)
    return direct_recv(conn);

  if (rbuf_reserve(conn) < 0) {
    pthread_mutex_lock(&conn->lock);
    conn_break(conn, HIPD_ENOMEM, "out of memory for a reply of %zu bytes",
               conn->rneed);
    pthread_mutex_unlock(&conn->lock);
    return HIPD_ENOMEM;
  }
  do
    n = recv(conn->fd, conn->rbuf + conn->rlen, conn->rcap - conn->rlen,
             MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  e = errno;
  if (n < 0 && (e == EAGAIN || e == EWOULDBLOCK))
    return 0;
  pthread_mutex_lock(&conn->lock);
  if (n > 0) {
    conn->rlen += (size_t)n;
    err = conn_input(conn);
  } else {
    if (n == 0)
      conn_break(conn, HIPD_EDISCONNECTED,
                 "disconnected from hipd (the daemon closed the connection)");
    else
      conn_break(conn, HIPD_EDISCONNECTED, "disconnected from hipd (%s)",
                 strerror(e));
    err = conn->broken;
  }
  pthread_mutex_unlock(&conn->lock);
  return err < 0 ? err : n;
}

/*
 * As io owner (lock held on entry and exit, dropped while polling), read
 * replies until @p call is done, the connection breaks, a sender wants the
 * socket or @p deadline passes. @return 0, or HIPD_ETIMEDOUT.
 */
static int io_receive(hipd_conn_t *conn, hipd_call_t *call, int64_t deadline)
{
  int polled = 0;

  for (;;) {
    struct pollfd pfd[2];
    int timeout, n, e, spin;

    if (call->state == CALL_DONE || conn->broken || conn->send_waiters > 0)
      return 0;
    timeout = remaining_ms(deadline);
    if (timeout == 0 && polled)
      return HIPD_ETIMEDOUT;
    polled = 1;
    pfd[0] = (struct pollfd){.fd = conn->fd, .events = POLLIN};
    pfd[1] = (struct pollfd){.fd = conn->wake_fd, .events = POLLIN};
    spin = conn->busy_poll_us;
    pthread_mutex_unlock(&conn->lock);
    n = 0;
    if (spin > 0) {
      /* A reply due within microseconds is read without the wake-up
       * latency of a sleeping thread (as HIP's own synchronisation spins
       * before it yields). */
      int64_t until = now_ns() + (int64_t)spin * 1000;
      while ((n = poll(pfd, 2, 0)) == 0 && now_ns() < until)
        ;
    }
    if (n == 0)
      n = poll(pfd, 2, timeout);
    e = errno;
    if (n > 0 && pfd[1].revents != 0)
      wake_drain(conn);
    if (n > 0 && pfd[0].revents != 0)
      io_recv(conn); /* a failure breaks the connection, seen above */
    pthread_mutex_lock(&conn->lock);
    if (n < 0 && e != EINTR)
      conn_break(conn, HIPD_EDISCONNECTED, "disconnected from hipd (poll: %s)",
                 strerror(e));
  }
}

/*
 * Wait until @p call is done (lock held), doing the socket I/O whenever no
 * other thread does, until @p deadline (0: just read what has arrived).
 * @return 0 once done, or HIPD_ETIMEDOUT.
 */
static int obuf_flush_locked(hipd_conn_t *conn, int64_t deadline);

static int call_wait_locked(hipd_call_t *call, int64_t deadline)
{
  hipd_conn_t *conn = call->conn;

  /* A corked request is written before anyone waits for a reply (its own
   * or a later one's). */
  if (conn->olen > 0 && call->state != CALL_DONE)
    obuf_flush_locked(conn, deadline_after(conn->timeout_ms));
  while (call->state != CALL_DONE) {
    if (!conn->io_busy && conn->send_waiters == 0) {
      int err;
      conn->io_busy = 1;
      err = io_receive(conn, call, deadline);
      conn->io_busy = 0;
      pthread_cond_broadcast(&conn->cond);
      if (err < 0)
        break;
      continue;
    }
    if (cond_wait_until(conn, deadline) < 0)
      break;
  }
  return call->state == CALL_DONE ? 0 : HIPD_ETIMEDOUT;
}

/* --------------------------------------------------------------- sending */

/*
 * Write iov[0, niov) to the socket (io owner, lock not held), reading
 * replies whenever the socket is full. Modifies @p iov. *@p sent counts the
 * bytes written. @return 0; HIPD_ETIMEDOUT at @p deadline (the connection
 * is left as it is); or the negative code the connection broke with.
 */
static int io_send(hipd_conn_t *conn, struct iovec *iov, size_t niov,
                   int send_fd, int64_t deadline, size_t *sent)
{
  proto_fd_ctl_t ctl;
  size_t i = 0;

  while (i < niov) {
    struct msghdr mh = {0};
    struct pollfd pfd;
    ssize_t n;
    int e;

    if (iov[i].iov_len == 0) {
      i++;
      continue;
    }
    mh.msg_iov = iov + i;
    mh.msg_iovlen = niov - i < IOV_MAX ? niov - i : IOV_MAX;
    /* The descriptor rides on the request's first bytes: the daemon
     * receives it no later than the request. */
    if (send_fd >= 0)
      proto_msg_attach_fd(&mh, &ctl, send_fd);
    n = sendmsg(conn->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      send_fd = -1;
      size_t left = (size_t)n;
      *sent += left;
      while (left > 0) {
        size_t step = left < iov[i].iov_len ? left : iov[i].iov_len;
        iov[i].iov_base = (char *)iov[i].iov_base + step;
        iov[i].iov_len -= step;
        left -= step;
        if (iov[i].iov_len == 0)
          i++;
      }
      continue;
    }
    e = errno;
    if (e == EINTR)
      continue;
    if (e == EAGAIN || e == EWOULDBLOCK) {
      int timeout = remaining_ms(deadline);
      if (timeout == 0)
        return HIPD_ETIMEDOUT;
      pfd = (struct pollfd){.fd = conn->fd, .events = POLLIN | POLLOUT};
      n = poll(&pfd, 1, timeout);
      if (n > 0 && (pfd.revents & (POLLIN | POLLHUP | POLLERR))) {
        /* The daemon may be waiting for us to read before it reads on:
         * take in all that it sent, so that its queue of replies drains. */
        ssize_t r;
        while ((r = io_recv(conn)) > 0)
          ;
        if (r < 0)
          return (int)r;
      } else if (n < 0 && errno != EINTR) {
        e = errno;
        pthread_mutex_lock(&conn->lock);
        conn_break(conn, HIPD_EDISCONNECTED,
                   "disconnected from hipd (poll: %s)", strerror(e));
        pthread_mutex_unlock(&conn->lock);
        return HIPD_EDISCONNECTED;
      }
      continue;
    }
    /* The daemon went away (EPIPE, ECONNRESET): first take in the replies it
     * sent before it did, then fail what is left. */
    while (io_recv(conn) > 0)
      ;
    pthread_mutex_lock(&conn->lock);
    conn_break(conn, HIPD_EDISCONNECTED, "disconnected from hipd (%s)",
               strerror(e));
    pthread_mutex_unlock(&conn->lock);
    return HIPD_EDISCONNECTED;
  }
  return 0;
}

/* A fixed buffer for the head of a request ([0, msgid, method, nparams]). */
struct head_buf {
  size_t len;
  char data[CONN_METHOD_MAX + 32];
};

static int head_write_cb(void *data, const char *buf, size_t len)
{
  struct head_buf *hb = data;

  if (len > sizeof(hb->data) - hb->len)
    return -1;
  memcpy(hb->data + hb->len, buf, len);
  hb->len += len;
  return 0;
}

/* The packer's writer for a request's params: the body buffer, remembering
 * an allocation failure for conn_call_send() to report. */
static int body_write_cb(void *data, const char *buf, size_t len)
{
  hipd_call_t *call = data;

  if (call->pack_failed)
    return -1;
  if (len == 0)
    return 0;
  if (msgpack_vrefbuffer_write(&call->body, buf, len) != 0) {
    call->pack_failed = 1;
    return -1;
  }
  return 0;
}

int conn_call_begin(hipd_conn_t *conn, const char *method, uint32_t nparams,
                    hipd_call_t **out)
{
  hipd_call_t *call;

  *out = NULL;
  if (conn == NULL)
    return conn_fail(NULL, HIPD_EINVAL, "%s: the connection is NULL", method);
  if (strlen(method) > CONN_METHOD_MAX)
    return conn_fail(conn, HIPD_EINVAL, "method name too long: %.40s...",
                     method);
  call = calloc(1, sizeof(*call));
  if (call == NULL)
    return conn_fail(conn, HIPD_ENOMEM, "%s: out of memory", method);
  if (!msgpack_vrefbuffer_init(&call->body, BODY_REF_SIZE, BODY_CHUNK_SIZE)) {
    free(call);
    return conn_fail(conn, HIPD_ENOMEM, "%s: out of memory", method);
  }
  msgpack_packer_init(&call->pk, call, body_write_cb);
  call->conn = conn;
  call->method = method;
  call->nparams = nparams;
  call->state = CALL_BUILDING;
  call->send_fd = -1;
  pthread_mutex_lock(&conn->lock);
  conn->refs++;
  pthread_mutex_unlock(&conn->lock);
  *out = call;
  return 0;
}

int conn_call_abort(hipd_call_t *call, int code, const char *fmt, ...)
{
  hipd_conn_t *conn = call->conn;
  va_list ap;

  va_start(ap, fmt);
  err_setv(conn, fmt, ap);
  va_end(ap);
  msgpack_vrefbuffer_destroy(&call->body);
  call_destroy(call);
  conn_unref(conn);
  return code;
}

/*
 * Take the socket for sending (lock held): wake a polling io owner and wait
 * for it to let go. Waiters defer to senders (send_waiters), so the socket
 * comes to a sender as soon as the current owner lets go. @return 0 with
 * io_busy set, HIPD_ETIMEDOUT, or call's result if the connection broke.
 */
static int io_acquire_send(hipd_conn_t *conn, hipd_call_t *call,
                           int64_t deadline)
{
  int err = 0;

  conn->send_waiters++;
  if (conn->io_busy)
    wake_owner(conn);
  while (conn->io_busy && call->state != CALL_DONE && err == 0)
    err = cond_wait_until(conn, deadline);
  conn->send_waiters--;
  if (call->state == CALL_DONE)
    return call->result;
  if (conn->io_busy)
    return HIPD_ETIMEDOUT;
  conn->io_busy = 1;
  return 0;
}

/*
 * Write the corked requests (lock held on entry and on return; released
 * while writing). A request that went only partly out breaks the
 * connection, as in conn_call_send(). @return 0, HIPD_ETIMEDOUT or the
 * code the connection broke with.
 */
static int obuf_flush_locked(hipd_conn_t *conn, int64_t deadline)
{
  int err = 0;

  while (conn->olen > 0 && err == 0) {
    struct iovec iov;
    size_t sent = 0, len;
    char *buf;

    if (conn->broken)
      return conn->broken;
    conn->send_waiters++;
    if (conn->io_busy)
      wake_owner(conn);
    while (conn->io_busy && !conn->broken && err == 0)
      err = cond_wait_until(conn, deadline);
    conn->send_waiters--;
    if (conn->broken)
      return conn->broken;
    if (err != 0 || conn->io_busy)
      return HIPD_ETIMEDOUT;
    if (conn->olen == 0)
      break; /* another thread wrote them meanwhile */
    conn->io_busy = 1;
    buf = conn->obuf;
    len = conn->olen;
    conn->obuf = NULL;
    conn->olen = conn->ocap = 0;
    pthread_mutex_unlock(&conn->lock);
    iov = (struct iovec){.iov_base = buf, .iov_len = len};
    err = io_send(conn, &iov, 1, -1, deadline, &sent);
    free(buf);
    pthread_mutex_lock(&conn->lock);
    conn->io_busy = 0;
    pthread_cond_broadcast(&conn->cond);
    if (err == HIPD_ETIMEDOUT)
      conn_break(conn, HIPD_EDISCONNECTED,
                 "disconnected from hipd (timed out writing corked "
                 "requests)");
  }
  return err;
}

/* Append a whole request to the corked bytes (lock held). */
static int obuf_append(hipd_conn_t *conn, const struct iovec *iov, size_t niov)
{
  size_t len = 0;

  for (size_t i = 0; i < niov; i++)
    len += iov[i].iov_len;
  if (conn->ocap - conn->olen < len) {
    size_t ncap = conn->ocap ? conn->ocap : 4096;
    char *n;

    while (ncap - conn->olen < len)
      ncap *= 2;
    if ((n = realloc(conn->obuf, ncap)) == NULL)
      return HIPD_ENOMEM;
    conn->obuf = n;
    conn->ocap = ncap;
  }
  for (size_t i = 0; i < niov; i++) {
    memcpy(conn->obuf + conn->olen, iov[i].iov_base, iov[i].iov_len);
    conn->olen += iov[i].iov_len;
  }
  return 0;
}

void hipd_cork(hipd_conn_t *conn)
{
  if (conn == NULL)
    return;
  pthread_mutex_lock(&conn->lock);
  conn->corked++;
  pthread_mutex_unlock(&conn->lock);
}

int hipd_uncork(hipd_conn_t *conn)
{
  int err = 0;

  if (conn == NULL)
    return conn_fail(NULL, HIPD_EINVAL, "hipd_uncork: the connection is NULL");
  pthread_mutex_lock(&conn->lock);
  if (conn->corked > 0 && --conn->corked == 0)
    err = obuf_flush_locked(conn, deadline_after(conn->timeout_ms));
  if (err == 0 && conn->broken)
    err = conn->broken;
  pthread_mutex_unlock(&conn->lock);
  if (err < 0)
    return conn_fail(conn, err, "hipd_uncork: %s", hipd_strerror(err));
  return 0;
}

int conn_call_send(hipd_call_t *call, conn_decode_fn decode, conn_outs_t outs,
                   hipd_call_t **out)
{
  hipd_conn_t *conn = call->conn;
  const char *method = call->method;
  struct iovec stack_iov[STACK_IOV], *iov = stack_iov;
  const msgpack_iovec *vec = msgpack_vrefbuffer_vec(&call->body);
  size_t nvec = msgpack_vrefbuffer_veclen(&call->body);
  size_t body_len = 0, sent = 0;
  struct head_buf head = {0};
  msgpack_packer hpk;
  char msg[ERR_LEN];
  int timeout_ms;
  int err = 0;

  if (out == NULL)
    return conn_call_abort(call, HIPD_EINVAL, "%s: the call pointer is NULL",
                           method);
  *out = NULL;
  if (call->pack_failed)
    return conn_call_abort(call, HIPD_ENOMEM,
                           "%s: out of memory packing the request", method);
  for (size_t i = 0; i < nvec; i++)
    body_len += vec[i].iov_len;
  /* The daemon would take an oversize request for a protocol violation and
   * hang up, failing every other call in flight. */
  if (body_len > PROTO_DEFAULT_MAX_MESSAGE - sizeof(head.data))
    return conn_call_abort(call, HIPD_EMSGSIZE,
                           "%s: the request (%zu bytes) exceeds the message "
                           "limit of %zu bytes",
                           method, body_len, PROTO_DEFAULT_MAX_MESSAGE);
  if (nvec + 1 > STACK_IOV) {
    iov = malloc((nvec + 1) * sizeof(*iov));
    if (iov == NULL)
      return conn_call_abort(call, HIPD_ENOMEM, "%s: out of memory", method);
  }
  for (size_t i = 0; i < nvec; i++)
    iov[i + 1] = vec[i];
  call->decode = decode;
  call->outs = outs;

  pthread_mutex_lock(&conn->lock);
  if (conn->broken) {
    broken_message(conn, msg, sizeof(msg));
    err = HIPD_EDISCONNECTED;
    goto fail;
  }
  call->msgid = msgid_next(conn);
  call->state = CALL_PENDING;
  table_insert(conn, call);
  msgpack_packer_init(&hpk, &head, head_write_cb);
  proto_pack_request(&hpk, call->msgid, method, call->nparams);
  iov[0] = (struct iovec){.iov_base = head.data, .iov_len = head.len};
  timeout_ms = conn->timeout_ms;

  if (conn->corked > 0 && call->send_fd < 0 &&
      head.len + body_len <= CORK_FLUSH) {
    /* Corked: keep it with the others; write them when enough are here. */
    err = obuf_append(conn, iov, nvec + 1);
    if (err == 0 && conn->olen >= CORK_FLUSH)
      err = obuf_flush_locked(conn, deadline_after(timeout_ms));
    if (err == 0 || call->state == CALL_DONE)
      goto sent;
    table_remove(conn, call->msgid);
    snprintf(msg, sizeof(msg), "%s: %s", method, hipd_strerror(err));
    goto fail;
  }
  /* Whatever was corked goes first, to keep the order of requests. */
  if (conn->olen > 0)
    err = obuf_flush_locked(conn, deadline_after(timeout_ms));
  if (err == 0)
    err = io_acquire_send(conn, call, deadline_after(timeout_ms));
  if (err == 0) {
    pthread_mutex_unlock(&conn->lock);
    err = io_send(conn, iov, nvec + 1, call->send_fd,
                  deadline_after(timeout_ms), &sent);
    pthread_mutex_lock(&conn->lock);
    conn->io_busy = 0;
    pthread_cond_broadcast(&conn->cond);
  }
  if (err == 0) {
  sent:
    /* The call may even be done already; hipd_wait will tell. */
    pthread_mutex_unlock(&conn->lock);
    msgpack_vrefbuffer_destroy(&call->body);
    if (iov != stack_iov)
      free(iov);
    *out = call;
    return 0;
  }
  if (call->state == CALL_DONE) {
    /* The connection broke and failed the call with its reason. */
    err = call->result;
    snprintf(msg, sizeof(msg), "%s",
             call->error ? call->error : hipd_strerror(err));
  } else {
    /* Timed out: the request never went out whole. */
    table_remove(conn, call->msgid);
    snprintf(msg, sizeof(msg), "%s: timed out after %d ms sending the request",
             method, timeout_ms);
    if (sent > 0)
      conn_break(conn, HIPD_EDISCONNECTED,
                 "disconnected from hipd (timed out in the middle of sending "
                 "a '%s' request)",
                 method);
  }

fail:
  pthread_mutex_unlock(&conn->lock);
  if (iov != stack_iov)
    free(iov);
  return conn_call_abort(call, err, "%s", msg);
}

/* ------------------------------------------------------------ pipelining */

int hipd_wait(hipd_call_t *call)
{
  hipd_conn_t *conn;
  int err;

  if (call == NULL)
    return conn_fail(NULL, HIPD_EINVAL, "hipd_wait: the call is NULL");
  conn = call->conn;
  pthread_mutex_lock(&conn->lock);
  err = call_wait_locked(call, deadline_after(conn->timeout_ms));
  if (err < 0) {
    /* Abandon the call: the connection frees it when the late reply comes
     * (or it breaks), and a decoder never runs for it. It stops holding a
     * reference; the user's handle still holds one, since a closed
     * connection has no pending calls left to time out. */
    const char *method = call->method;
    int timeout_ms = conn->timeout_ms;
    call->state = CALL_ABANDONED;
    call->decode = NULL;
    pthread_mutex_unlock(&conn->lock);
    conn_fail(conn, err, "%s: no reply within %d ms", method, timeout_ms);
    conn_unref(conn);
    return err;
  }
  pthread_mutex_unlock(&conn->lock);
  err = call->result;
  if (err < 0)
    err_set(conn, "%s", call->error ? call->error : hipd_strerror(err));
  call_destroy(call);
  conn_unref(conn);
  return err;
}

int conn_sync(int err, hipd_call_t **call)
{
  return err < 0 ? err : hipd_wait(*call);
}

int hipd_call_done(hipd_call_t *call)
{
  int done;

  if (call == NULL)
    return 0;
  pthread_mutex_lock(&call->conn->lock);
  call_wait_locked(call, 0);
  done = call->state == CALL_DONE;
  pthread_mutex_unlock(&call->conn->lock);
  return done;
}

const char *hipd_call_error(hipd_call_t *call)
{
  const char *msg = "";

  if (call == NULL)
    return msg;
  pthread_mutex_lock(&call->conn->lock);
  if (call->state == CALL_DONE && call->error != NULL)
    msg = call->error;
  pthread_mutex_unlock(&call->conn->lock);
  return msg;
}

/* ------------------------------------------------------ common decoders */

int conn_decode_none(hipd_call_t *call, const msgpack_object *result,
                     const conn_outs_t *outs)
{
  return 0;
}

int conn_decode_bytes(hipd_call_t *call, const msgpack_object *result,
                      const conn_outs_t *outs)
{
  const char *p;
  size_t len;

  if (proto_obj_bytes(result, &p, &len) < 0)
    return conn_call_fail(call, HIPD_EPROTO,
                          "%s: expected bytes in the reply, got %s",
                          call->method, proto_obj_type_name(result));
  if (outs->p[1] != NULL)
    *(size_t *)outs->p[1] = len;
  if (len > outs->n)
    return conn_call_fail(call, HIPD_ERANGE,
                          "%s: the reply's %zu bytes do not fit the %zu-byte "
                          "buffer",
                          call->method, len, outs->n);
  if (len > 0)
    memcpy(outs->p[0], p, len);
  return 0;
}

int conn_decode_int(hipd_call_t *call, const msgpack_object *result,
                    const conn_outs_t *outs)
{
  int64_t v;

  if (proto_obj_int(result, INT64_MIN, INT64_MAX, &v) < 0)
    return conn_call_fail(call, HIPD_EPROTO,
                          "%s: expected an integer in the reply, got %s",
                          call->method, proto_obj_type_name(result));
  if (outs->p[0] != NULL)
    *(int64_t *)outs->p[0] = v;
  return 0;
}

int conn_decode_uint(hipd_call_t *call, const msgpack_object *result,
                     const conn_outs_t *outs)
{
  uint64_t v;

  if (proto_obj_uint(result, UINT64_MAX, &v) < 0)
    return conn_call_fail(call, HIPD_EPROTO,
                          "%s: expected an unsigned integer in the reply, got "
                          "%s",
                          call->method, proto_obj_type_name(result));
  if (outs->p[0] != NULL)
    *(uint64_t *)outs->p[0] = v;
  return 0;
}

int conn_decode_int32(hipd_call_t *call, const msgpack_object *result,
                      const conn_outs_t *outs)
{
  int64_t v;

  if (proto_obj_int(result, INT_MIN, INT_MAX, &v) < 0)
    return conn_call_fail(call, HIPD_EPROTO,
                          "%s: expected a small integer in the reply, got %s",
                          call->method, proto_obj_type_name(result));
  if (outs->p[0] != NULL)
    *(int *)outs->p[0] = (int)v;
  return 0;
}

int conn_decode_bool(hipd_call_t *call, const msgpack_object *result,
                     const conn_outs_t *outs)
{
  if (result->type != MSGPACK_OBJECT_BOOLEAN)
    return conn_call_fail(call, HIPD_EPROTO,
                          "%s: expected a boolean in the reply, got %s",
                          call->method, proto_obj_type_name(result));
  if (outs->p[0] != NULL)
    *(int *)outs->p[0] = result->via.boolean ? 1 : 0;
  return 0;
}

int conn_decode_float(hipd_call_t *call, const msgpack_object *result,
                      const conn_outs_t *outs)
{
  double v;

  if (proto_obj_double(result, &v) < 0)
    return conn_call_fail(call, HIPD_EPROTO,
                          "%s: expected a number in the reply, got %s",
                          call->method, proto_obj_type_name(result));
  if (outs->p[0] != NULL)
    *(float *)outs->p[0] = (float)v;
  return 0;
}

/* ----------------------------------------------------- common parameters */

int conn_check_device(hipd_conn_t *conn, const char *method, int dev)
{
  if (dev < 0 && dev != HIPD_DEVICE_CURRENT)
    return conn_fail(conn, HIPD_ENODEV,
                     "%s: no device %d (a device index, or "
                     "HIPD_DEVICE_CURRENT)",
                     method, dev);
  return 0;
}

void conn_pack_device(msgpack_packer *pk, int dev)
{
  if (dev == HIPD_DEVICE_CURRENT)
    msgpack_pack_nil(pk);
  else
    msgpack_pack_int(pk, dev);
}

int conn_call_handle(hipd_conn_t *conn, const char *method, uint64_t handle,
                     conn_decode_fn decode, conn_outs_t outs, hipd_call_t **out)
{
  hipd_call_t *c;
  int err = conn_call_begin(conn, method, 1, &c);

  if (err < 0)
    return err;
  msgpack_pack_uint64(&c->pk, handle);
  return conn_call_send(c, decode, outs, out);
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
  conn->busy_poll_us = default_busy_poll();
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
  *out = conn;

done:
  free(defpath);
  return err;
}

int hipd_connect(const char *path, hipd_conn_t **out)
{
  return hipd_connect2(path, NULL, out);
}

const char *conn_client_name(const hipd_conn_t *conn)
{
  return conn->client_name;
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
