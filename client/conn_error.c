/* SPDX-License-Identifier: MIT */
/* client/conn_error.c: the thread-local last error of each connection
 * (hipd_last_error), and conn_fail() for a method that fails before any
 * call exists.
 */
#include "config.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "conn_internal.h"

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

void conn_err_setv(const hipd_conn_t *conn, const char *fmt, va_list ap)
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

void conn_err_set(const hipd_conn_t *conn, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  conn_err_setv(conn, fmt, ap);
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
  conn_err_setv(conn, fmt, ap);
  va_end(ap);
  return code;
}
