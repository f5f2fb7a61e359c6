/* SPDX-License-Identifier: MIT */
/* client/conn_call.c: deadlines, the table of pending calls by msgid, the
 * lifetime of calls and of the connection, and breaking the connection: what
 * the receiving (conn_recv.c), sending (conn_send.c) and waiting
 * (conn_wait.c) sides share. It calls none of them.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "conn_internal.h"
#include "util/clock.h"

/* ----------------------------------------------------------------- time */

/* Deadlines are CLOCK_MONOTONIC nanoseconds; NO_DEADLINE waits forever and
 * a deadline of 0 has always passed (a poll). */
/* $HIPD_BUSY_POLL_US, else 20 us on machines with 8 or more CPUs (where a
 * spinning waiter takes no CPU another thread needs), else 0. */
int conn_default_busy_poll(void)
{
  const char *env = getenv("HIPD_BUSY_POLL_US");

  if (env != NULL && *env != '\0') {
    long v = strtol(env, NULL, 10);
    return v > 0 ? (v > 1000000 ? 1000000 : (int)v) : 0;
  }
  return sysconf(_SC_NPROCESSORS_ONLN) >= 8 ? 20 : 0;
}

/* A copy's expected time adds at most this much to a wait's spin: beyond
 * it, the few microseconds a wake-up costs are a small part of the wait.
 * Copies smaller than CONN_XFER_LEARN_MIN take about a round trip, which
 * the spin covers already. The rate learnt includes the round trip, so it
 * errs long, which costs nothing when the answer comes in time: the spin
 * ends there. */
#define CONN_XFER_SPIN_MAX_US 200
#define CONN_XFER_LEARN_MIN ((size_t)64 << 10)

uint32_t conn_xfer_spin_us(const hipd_conn_t *conn, size_t len)
{
  uint64_t ps = __atomic_load_n(&conn->xfer_ps_per_byte, __ATOMIC_RELAXED);
  uint64_t us;

  if (ps == 0 || len < CONN_XFER_LEARN_MIN)
    return 0;
  us = (uint64_t)(len / 1000) * ps / 1000; /* ns, then us */
  return us > CONN_XFER_SPIN_MAX_US ? CONN_XFER_SPIN_MAX_US : (uint32_t)us;
}

void conn_xfer_learn(hipd_conn_t *conn, size_t len, uint64_t ns)
{
  uint64_t ps, old;

  if (len < CONN_XFER_LEARN_MIN)
    return;
  ps = ns / (len / 1000); /* ns per 1000 bytes: ps a byte */
  ps = ps == 0 ? 1 : ps > UINT32_MAX ? UINT32_MAX : ps;
  /* Concurrent copies on one connection race here: either estimate is a
   * fair one. A copy that waited behind other work on its stream took
   * longer than the copy: one such sample moves the estimate by 4 times
   * at most. */
  old = __atomic_load_n(&conn->xfer_ps_per_byte, __ATOMIC_RELAXED);
  if (old != 0 && ps > old * 4)
    ps = old * 4;
  __atomic_store_n(&conn->xfer_ps_per_byte,
                   (uint32_t)(old == 0 ? ps : (old * 3 + ps) / 4),
                   __ATOMIC_RELAXED);
}

int64_t conn_deadline_after(int timeout_ms)
{
  return timeout_ms > 0 ? (int64_t)util_now_ns() + (int64_t)timeout_ms * 1000000
                        : NO_DEADLINE;
}

/* Milliseconds left for poll(), rounded up so that poll never returns just
 * before the deadline; -1 for none. */
int conn_remaining_ms(int64_t deadline)
{
  int64_t left;

  if (deadline == NO_DEADLINE)
    return -1;
  left = deadline - (int64_t)util_now_ns();
  if (left <= 0)
    return 0;
  left = (left + 999999) / 1000000;
  return left > INT_MAX ? INT_MAX : (int)left;
}

/* Wait on the connection's condition variable (lock held) until signalled
 * or @p deadline. @return 0, or HIPD_ETIMEDOUT once the deadline passed. */
int conn_cond_wait_until(hipd_conn_t *conn, int64_t deadline)
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

hipd_call_t *conn_table_find(const hipd_conn_t *conn, uint32_t msgid)
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

void conn_table_insert(hipd_conn_t *conn, hipd_call_t *call)
{
  hipd_call_t **b;

  if (conn->npending >= 2 * conn->table_size)
    table_grow(conn);
  b = table_bucket(conn, call->msgid);
  call->hnext = *b;
  *b = call;
  conn->npending++;
}

hipd_call_t *conn_table_remove(hipd_conn_t *conn, uint32_t msgid)
{
  hipd_call_t **p = table_bucket(conn, msgid), *c;

  for (; (c = *p) != NULL; p = &c->hnext) {
    if (c->msgid == msgid) {
      *p = c->hnext;
      c->hnext = NULL;
      conn->npending--;
      if (c->on_socket) {
        c->on_socket = 0;
        conn->sock_calls--;
      }
      return c;
    }
  }
  return NULL;
}

/* The next free msgid. Ids wrap at 2^32; one still pending (a slow or
 * abandoned call) is skipped so that replies are never confused. */
uint32_t conn_msgid_next(hipd_conn_t *conn)
{
  uint32_t id;

  do
    id = conn->next_msgid++;
  while (conn_table_find(conn, id) != NULL);
  return id;
}

/* ---------------------------------------------------------------- calls */

void conn_destroy(hipd_conn_t *conn)
{
  if (conn->fd >= 0)
    close(conn->fd);
  if (conn->wake_fd >= 0)
    close(conn->wake_fd);
  free(conn->table);
  free(conn->rbuf);
  free(conn->obuf);
  free(conn->client_name);
  conn_ring_unmap(conn->ring);
  msgpack_zone_destroy(&conn->zone);
  pthread_cond_destroy(&conn->cond);
  pthread_mutex_destroy(&conn->lock);
  free(conn);
}

/* Drop a reference (lock not held); the last one frees the connection. */
void conn_unref(hipd_conn_t *conn)
{
  unsigned refs;

  pthread_mutex_lock(&conn->lock);
  refs = --conn->refs;
  pthread_mutex_unlock(&conn->lock);
  if (refs == 0)
    conn_destroy(conn);
}

/* Free a call's memory (its body is already gone). Touches no connection. */
void conn_call_destroy(hipd_call_t *call)
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

/* Wake an io owner blocked in poll() or asleep on its ring's futex
 * doorbell (harmless when there is none). The eventfd first: an owner
 * that set cq_wait after our look sees it in its last poll. */
void conn_wake_owner(hipd_conn_t *conn)
{
  uint64_t one = 1;
  ssize_t n = write(conn->wake_fd, &one, sizeof(one));

  (void)n; /* EAGAIN: a wake-up is already pending, which is enough. */
  conn_ring_nudge(conn->ring);
}

void conn_wake_drain(hipd_conn_t *conn)
{
  uint64_t v;
  ssize_t n = read(conn->wake_fd, &v, sizeof(v));

  (void)n;
}

/* Fail a call of a broken connection with its reason (lock held): as
 * "METHOD: reason" if @p named. */
static void call_fail_broken(hipd_conn_t *conn, hipd_call_t *c, int named)
{
  if (named)
    conn_call_fail(c, conn->broken, "%s: %s", c->method, conn->broken_msg);
  else
    conn_call_fail(c, conn->broken, "%s", conn->broken_msg);
  c->state = CALL_DONE;
}

/*
 * Break the connection (lock held): the first reason sticks. Every pending
 * call completes with @p code and the printf-style message (after
 * "METHOD: " if @p named); abandoned calls
 * are freed; the socket is shut down so that the daemon sees the end and any
 * thread blocked on it wakes. Later calls fail with HIPD_EDISCONNECTED.
 */
static void conn_breakv(hipd_conn_t *conn, int code, int named, const char *fmt,
                        va_list ap) __attribute__((format(printf, 4, 0)));

static void conn_breakv(hipd_conn_t *conn, int code, int named, const char *fmt,
                        va_list ap)
{
  if (conn->broken)
    return;
  conn->broken = code;
  vsnprintf(conn->broken_msg, sizeof(conn->broken_msg), fmt, ap);
  shutdown(conn->fd, SHUT_RDWR);
  for (size_t i = 0; i < conn->table_size; i++) {
    hipd_call_t *c = conn->table[i], *next;
    conn->table[i] = NULL;
    for (; c != NULL; c = next) {
      next = c->hnext;
      c->hnext = NULL;
      c->on_socket = 0;
      if (c->state == CALL_ABANDONED) {
        conn_call_destroy(c);
        continue;
      }
      call_fail_broken(conn, c, named);
    }
  }
  conn->npending = 0;
  conn->sock_calls = 0;
  if (conn->dcall != NULL) {
    hipd_call_t *c = conn->dcall;
    conn->dcall = NULL;
    if (c->state == CALL_ABANDONED)
      conn_call_destroy(c);
    else
      call_fail_broken(conn, c, named);
  }
  conn_wake_owner(conn);
  pthread_cond_broadcast(&conn->cond);
}

void conn_break(hipd_conn_t *conn, int code, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  conn_breakv(conn, code, 0, fmt, ap);
  va_end(ap);
}

void conn_break_answered(hipd_conn_t *conn, int code, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  conn_breakv(conn, code, 1, fmt, ap);
  va_end(ap);
}

/* The message for a call made after the connection broke (lock held). */
void conn_broken_message(const hipd_conn_t *conn, char *buf, size_t size)
{
  if (conn->broken == HIPD_EDISCONNECTED)
    snprintf(buf, size, "%s", conn->broken_msg);
  else
    snprintf(buf, size, "disconnected from hipd (after an error: %s)",
             conn->broken_msg);
}
