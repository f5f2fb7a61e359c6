/* SPDX-License-Identifier: MIT */
/* client/conn_send.c: building and sending requests (conn_call_begin,
 * conn_call_send, conn_call_abort), writing to the socket while reading
 * replies, and corking (hipd_cork, hipd_uncork).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "conn_internal.h"

#define BODY_REF_SIZE 4096   /* params this large are not copied */
#define BODY_CHUNK_SIZE 1024 /* first chunk of a request's body */
#define STACK_IOV 16         /* iovecs a request sends from the stack */
#define CORK_FLUSH ((size_t)64 << 10) /* corked bytes that force a write */

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
      int timeout = conn_remaining_ms(deadline);
      if (timeout == 0)
        return HIPD_ETIMEDOUT;
      pfd = (struct pollfd){.fd = conn->fd, .events = POLLIN | POLLOUT};
      n = poll(&pfd, 1, timeout);
      if (n > 0 && (pfd.revents & (POLLIN | POLLHUP | POLLERR))) {
        /* The daemon may be waiting for us to read before it reads on:
         * take in all that it sent, so that its queue of replies drains. */
        ssize_t r;
        while ((r = conn_io_recv(conn)) > 0)
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
    while (conn_io_recv(conn) > 0)
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
  /* A copy into the call itself while it fits and is small: the packer
   * writes each value apart, and the vrefbuffer's append was most of the
   * client's instructions for a launch (callgrind, 2026-12-06). */
  if (!call->spilled && len < BODY_REF_SIZE &&
      len <= sizeof(call->small) - call->small_len) {
    memcpy(call->small + call->small_len, buf, len);
    call->small_len += len;
    return 0;
  }
  if (!call->spilled) {
    if (!msgpack_vrefbuffer_init(&call->body, BODY_REF_SIZE, BODY_CHUNK_SIZE)) {
      call->pack_failed = 1;
      return -1;
    }
    call->spilled = 1;
    if (call->small_len > 0 &&
        msgpack_vrefbuffer_write(&call->body, call->small, call->small_len) !=
            0) {
      call->pack_failed = 1;
      return -1;
    }
  }
  if (msgpack_vrefbuffer_write(&call->body, buf, len) != 0) {
    call->pack_failed = 1;
    return -1;
  }
  return 0;
}

/* Give back what the call's packed params hold. */
static void body_free(hipd_call_t *call)
{
  if (call->spilled)
    msgpack_vrefbuffer_destroy(&call->body);
  call->spilled = 0;
  call->small_len = 0;
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
  /* malloc, not calloc, and only the fields cleared: glibc's calloc
   * never reuses the thread's cached chunks, and small needs no zeroes. */
  call = malloc(sizeof(*call));
  if (call == NULL)
    return conn_fail(conn, HIPD_ENOMEM, "%s: out of memory", method);
  memset(call, 0, offsetof(hipd_call_t, small));
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
  conn_err_setv(conn, fmt, ap);
  va_end(ap);
  body_free(call);
  conn_call_destroy(call);
  conn_unref(conn);
  return code;
}

/*
 * Take the socket for sending (lock held): wake a polling io owner and wait
 * for it to let go. Waiters defer to senders (send_waiters), so the socket
 * comes to a sender as soon as the current owner lets go. @return 1 with
 * io_busy set: the socket is ours until we clear it. 0 if it was not taken:
 * the deadline passed, or @p call was done meanwhile (the connection broke,
 * or the owner read its answer from the ring), which call->state tells.
 * A done call must not be taken for a taken socket: the owner still reads
 * it, and clearing io_busy under it would let a second thread read too.
 */
static int io_take_socket(hipd_conn_t *conn, hipd_call_t *call,
                          int64_t deadline)
{
  int err = 0;

  conn->send_waiters++;
  if (conn->io_busy)
    conn_wake_owner(conn);
  while (conn->io_busy && call->state != CALL_DONE && err == 0)
    err = conn_cond_wait_until(conn, deadline);
  conn->send_waiters--;
  if (call->state == CALL_DONE || conn->io_busy) {
    /* A reader that let go for us may wait for the senders to be done:
     * without this it would sleep with nobody at the socket. */
    pthread_cond_broadcast(&conn->cond);
    return 0;
  }
  conn->io_busy = 1;
  return 1;
}

/*
 * Write the corked requests (lock held on entry and on return; released
 * while writing). A request that went only partly out breaks the
 * connection, as in conn_call_send(). @return 0, HIPD_ETIMEDOUT or the
 * code the connection broke with.
 */
int conn_obuf_flush_locked(hipd_conn_t *conn, int64_t deadline)
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
      conn_wake_owner(conn);
    while (conn->io_busy && !conn->broken && err == 0)
      err = conn_cond_wait_until(conn, deadline);
    conn->send_waiters--;
    if (conn->broken || err != 0 || conn->io_busy || conn->olen == 0) {
      /* Not taking the socket: a reader that let go for us may wait for
       * the senders to be done (as in io_take_socket()). */
      pthread_cond_broadcast(&conn->cond);
      if (conn->broken)
        return conn->broken;
      if (err != 0 || conn->io_busy)
        return HIPD_ETIMEDOUT;
      break; /* another thread wrote them meanwhile */
    }
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
    err = conn_obuf_flush_locked(conn, conn_deadline_after(conn->timeout_ms));
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
  msgpack_iovec small = {.iov_base = call->small, .iov_len = call->small_len};
  const msgpack_iovec *vec =
      call->spilled ? msgpack_vrefbuffer_vec(&call->body) : &small;
  size_t nvec = call->spilled ? msgpack_vrefbuffer_veclen(&call->body)
                              : call->small_len > 0;
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
    conn_broken_message(conn, msg, sizeof(msg));
    err = HIPD_EDISCONNECTED;
    goto fail;
  }
  call->msgid = conn_msgid_next(conn);
  call->state = CALL_PENDING;
  conn_table_insert(conn, call);
  msgpack_packer_init(&hpk, &head, head_write_cb);
  proto_pack_request(&hpk, call->msgid, method, call->nparams);
  iov[0] = (struct iovec){.iov_base = head.data, .iov_len = head.len};
  timeout_ms = conn->timeout_ms;

  if (conn->ring != NULL && conn->corked == 0 && conn->olen == 0 &&
      call->send_fd < 0 && proto_ring_method(method) &&
      conn_ring_put(conn->ring, conn->sock_sent, iov, nvec + 1)) {
    /* On the ring: published; the daemon is told only if it stopped
     * polling (an io owner that waits tells it otherwise). */
    if (conn_ring_kick_wanted(conn->ring) &&
        io_take_socket(conn, call, conn_deadline_after(timeout_ms))) {
      /* Once more: an io owner we waited for may have kicked for it. */
      if (conn_ring_kick_wanted(conn->ring))
        conn_ring_kick(conn);
      conn->io_busy = 0;
      pthread_cond_broadcast(&conn->cond);
    }
    goto sent;
  }
  /* Its answer comes on the socket: a waiting io owner watches it. */
  call->on_socket = 1;
  conn->sock_calls++;
  if (conn->corked > 0 && call->send_fd < 0 &&
      head.len + body_len <= CORK_FLUSH) {
    /* Corked: keep it with the others; write them when enough are here. */
    err = obuf_append(conn, iov, nvec + 1);
    if (err == 0)
      conn->sock_sent++;
    if (err == 0 && conn->olen >= CORK_FLUSH)
      err = conn_obuf_flush_locked(conn, conn_deadline_after(timeout_ms));
    if (err == 0 || call->state == CALL_DONE)
      goto sent;
    conn_table_remove(conn, call->msgid);
    snprintf(msg, sizeof(msg), "%s: %s", method, hipd_strerror(err));
    goto fail;
  }
  /* Whatever was corked goes first, to keep the order of requests. */
  if (conn->olen > 0)
    err = conn_obuf_flush_locked(conn, conn_deadline_after(timeout_ms));
  if (err == 0 && !io_take_socket(conn, call, conn_deadline_after(timeout_ms)))
    /* Not sent: a call done meanwhile goes to hipd_wait with its result. */
    err = call->state == CALL_DONE ? call->result : HIPD_ETIMEDOUT;
  else if (err == 0) {
    pthread_mutex_unlock(&conn->lock);
    err = io_send(conn, iov, nvec + 1, call->send_fd,
                  conn_deadline_after(timeout_ms), &sent);
    pthread_mutex_lock(&conn->lock);
    if (err == 0)
      conn->sock_sent++;
    conn->io_busy = 0;
    pthread_cond_broadcast(&conn->cond);
  }
  if (err == 0) {
  sent:
    /* The call may even be done already; hipd_wait will tell. */
    pthread_mutex_unlock(&conn->lock);
    body_free(call);
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
    conn_table_remove(conn, call->msgid);
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
