/* SPDX-License-Identifier: MIT */
/* client/conn_wait.c: waiting for a call (hipd_wait, conn_sync) and
 * pipelining (hipd_call_done, hipd_call_error). A waiter writes the corked
 * requests (conn_send.c) and, when no other thread does, receives replies
 * (conn_recv.c) until its call is done; the table and the deadlines are
 * conn_call.c's.
 */
#include "config.h"

#include <pthread.h>
#include <string.h>

#include "conn_internal.h"

/*
 * Wait until @p call is done (lock held), doing the socket I/O whenever no
 * other thread does, until @p deadline (0: just read what has arrived).
 * @return 0 once done, or HIPD_ETIMEDOUT.
 */
static int call_wait_locked(hipd_call_t *call, int64_t deadline)
{
  hipd_conn_t *conn = call->conn;

  /* A corked request is written before anyone waits for a reply (its own
   * or a later one's). */
  if (conn->olen > 0 && call->state != CALL_DONE)
    conn_obuf_flush_locked(conn, conn_deadline_after(conn->timeout_ms));
  while (call->state != CALL_DONE) {
    if (!conn->io_busy && conn->send_waiters == 0) {
      int err;
      conn->io_busy = 1;
      err = conn_io_receive(conn, call, deadline);
      conn->io_busy = 0;
      pthread_cond_broadcast(&conn->cond);
      if (err < 0)
        break;
      continue;
    }
    if (conn_cond_wait_until(conn, deadline) < 0)
      break;
  }
  return call->state == CALL_DONE ? 0 : HIPD_ETIMEDOUT;
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
  err = call_wait_locked(call, conn_deadline_after(conn->timeout_ms));
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
    conn_err_set(conn, "%s", call->error ? call->error : hipd_strerror(err));
  conn_call_destroy(call);
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

const char *hipd_conn_lost_reason(hipd_conn_t *conn, int *code)
{
  const char *why = NULL;

  if (conn == NULL)
    return NULL;
  pthread_mutex_lock(&conn->lock);
  if (!conn->broken && !conn->io_busy && conn->send_waiters == 0) {
    /* Read what has arrived, without waiting: the daemon's last message
     * may be there already. */
    hipd_call_t probe;
    memset(&probe, 0, sizeof(probe));
    probe.conn = conn;
    probe.state = CALL_PENDING;
    conn->io_busy = 1;
    conn_io_receive(conn, &probe, 0);
    conn->io_busy = 0;
    pthread_cond_broadcast(&conn->cond);
  }
  if (conn->broken) {
    why = conn->broken_msg;
    if (code != NULL)
      *code = conn->told != 0 ? conn->told : conn->broken;
  }
  pthread_mutex_unlock(&conn->lock);
  return why;
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
