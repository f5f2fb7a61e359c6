/* SPDX-License-Identifier: MIT */
/* client/conn_recv.c: the receive side of a connection, as io owner:
 * reading the socket, framing replies, receiving a large one straight into
 * its caller's buffer, and dispatching each to the call it answers.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "conn_internal.h"
#include "util/clock.h"
#include "util/cpus.h"

#define RECV_CHUNK ((size_t)64 << 10)  /* least free space offered to recv */
#define RECV_KEEP ((size_t)1 << 20)    /* larger idle buffers are freed */
#define DIRECT_MIN ((size_t)256 << 10) /* replies received in place */

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

/* Is buf[0, len) a successful reply with a nil result, [1, msgid, nil,
 * nil], the answer of every launch, wait and copy? *@p msg is then what
 * proto_msg_decode() makes of it, without msgpack_unpack and its zone
 * (about 500 of the 5,700 instructions a client spent on a launch,
 * callgrind, 2026-12-06). */
static int nil_success(const uint8_t *buf, size_t len, proto_msg_t *msg)
{
  static const msgpack_object nil = {.type = MSGPACK_OBJECT_NIL};
  uint64_t msgid;
  size_t n;

  if (len < 5 || len > 9 || buf[0] != 0x94 || buf[1] != 0x01)
    return 0;
  n = read_uint(buf + 2, len - 2, &msgid);
  if (n == 0 || 2 + n + 2 != len || buf[2 + n] != 0xc0 || buf[3 + n] != 0xc0)
    return 0;
  memset(msg, 0, sizeof(*msg));
  msg->type = PROTO_RESPONSE;
  msg->msgid = (uint32_t)msgid;
  msg->error = &nil;
  msg->result = &nil;
  return 1;
}

/*
 * Dispatch one complete message buf[0, len) (lock held): complete the call
 * it answers, running its decoder. Notifications are ignored (ring.wake
 * only ends a sleep, which reading it did), but for session.refused, which
 * breaks the connection with the daemon's reason. @return 0, or a negative code
 * after breaking the connection on a protocol violation.
 */
static int conn_dispatch(hipd_conn_t *conn, const uint8_t *buf, size_t len)
{
  const char *reason = "";
  hipd_call_t *call;
  proto_msg_t msg;
  int err;

  if (nil_success(buf, len, &msg))
    err = 0; /* what proto_msg_decode would have made of it */
  else
    err = proto_msg_decode(buf, len, &conn->zone, &msg, &reason);
  if (err == HIPD_ENOMEM) {
    conn_break(conn, err, "out of memory decoding a reply of %zu bytes", len);
    return err;
  }
  if (err < 0) {
    conn_break(conn, err, "protocol error from hipd: %s", reason);
    return err;
  }
  if (msg.type == PROTO_NOTIFY) {
    const char *why;
    size_t wlen;
    int code;
    err = proto_closed_decode(&msg, &code, &why, &wlen);
    if (err != 0) {
      /* The daemon closed the session for a reason of its own, its last
       * message: the pending calls fail with it, and
       * hipd_conn_lost_reason() reports it. */
      if (err < 0 || code >= 0) {
        conn_break(conn, HIPD_EPROTO,
                   "protocol error from hipd: a malformed session.closed");
        return HIPD_EPROTO;
      }
      if (wlen > ERROR_MAX)
        wlen = ERROR_MAX;
      /* The calls fail as at any connection end (EDISCONNECTED), with
       * hipd's reason; its code is for hipd_conn_lost_reason(). */
      if (conn->broken == 0)
        conn->told = code;
      conn_break(conn, HIPD_EDISCONNECTED, "hipd closed this session: %.*s",
                 (int)wlen, why);
      return HIPD_EDISCONNECTED;
    }
    err = proto_refused_decode(&msg, &code, &why, &wlen);
    if (err == 0)
      return 0;
    if (err < 0 || code >= 0) {
      conn_break(conn, HIPD_EPROTO,
                 "protocol error from hipd: a malformed session.refused");
      return HIPD_EPROTO;
    }
    /* The access rules refused us at connect: every call fails as the
     * daemon used to answer each request, "METHOD: why". */
    if (wlen > ERROR_MAX)
      wlen = ERROR_MAX;
    conn_break_answered(conn, code, "%.*s", (int)wlen, why);
    return code;
  }
  if (msg.type != PROTO_RESPONSE) {
    conn_break(conn, HIPD_EPROTO,
               "protocol error from hipd: the daemon sent a request (%.*s)",
               (int)msg.method_len, msg.method);
    return HIPD_EPROTO;
  }
  call = conn_table_remove(conn, msg.msgid);
  if (call == NULL) {
    conn_break(conn, HIPD_EPROTO,
               "protocol error from hipd: reply to unknown request id %" PRIu32,
               msg.msgid);
    return HIPD_EPROTO;
  }
  if (call->state == CALL_ABANDONED) {
    conn_call_destroy(call);
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
  call = conn_table_find(conn, (uint32_t)msgid);
  if (call == NULL || call->state != CALL_PENDING || call->direct_dst == NULL ||
      call->direct_len != blen || n - off > blen)
    return 0;
  conn_table_remove(conn, (uint32_t)msgid);
  memcpy(call->direct_dst, p + off, n - off);
  conn->dcall = call;
  conn->ddst = call->direct_dst;
  conn->dlen = blen;
  conn->dgot = n - off;
  conn->rneed = 0;
  return 1;
}

/* conn_io_recv() for a reply received in place: read its next bytes into the
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
      conn_call_destroy(call);
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
ssize_t conn_io_recv(hipd_conn_t *conn)
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

int conn_ring_reap(hipd_conn_t *conn)
{
  const ring_cqe_t *e;
  int n = 0, err;

  if (conn->ring == NULL)
    return 0;
  while (!conn->broken && (e = conn_ring_peek(conn->ring)) != NULL) {
    uint32_t len = e->len;
    if (len == 0 || len > RING_CQE_DATA) {
      conn_break(conn, HIPD_EPROTO,
                 "protocol error from hipd: a ring completion of %u bytes",
                 len);
      return HIPD_EPROTO;
    }
    /* The daemon leaves a published slot alone until we pop it. */
    err = conn_dispatch(conn, e->data, len);
    msgpack_zone_clear(&conn->zone);
    if (err < 0)
      return err;
    conn_ring_pop(conn->ring);
    n++;
  }
  return conn->broken ? conn->broken : n;
}

void conn_ring_kick(hipd_conn_t *conn)
{
  proto_smallbuf_t k = {.len = 0};
  size_t off = 0;
  int64_t deadline =
      conn_deadline_after(conn->timeout_ms > 0 ? conn->timeout_ms : 10000);
  msgpack_packer pk;
  int e = 0;

  msgpack_packer_init(&pk, &k, proto_smallbuf_write);
  proto_pack_notify(&pk, RING_KICK, 0);
  conn->ring->kicked = conn->ring->sq_tail;
  pthread_mutex_unlock(&conn->lock);
  while (off < k.len) {
    ssize_t n =
        send(conn->fd, k.b + off, k.len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      off += (size_t)n;
      continue;
    }
    e = errno;
    if (n < 0 && e == EINTR)
      continue;
    if (n < 0 && (e == EAGAIN || e == EWOULDBLOCK)) {
      struct pollfd pfd = {.fd = conn->fd, .events = POLLOUT};
      int t = conn_remaining_ms(deadline);
      /* A socket too full for the whole kick has bytes the daemon has not
       * read, and it runs the ring before each message it reads: no kick
       * is needed. Half a kick must be finished, for the framing. */
      if (off == 0)
        break;
      if (t != 0 && poll(&pfd, 1, t) >= 0)
        continue;
      e = ETIMEDOUT;
    }
    break;
  }
  pthread_mutex_lock(&conn->lock);
  if (off < k.len && !(off == 0 && (e == EAGAIN || e == EWOULDBLOCK)))
    conn_break(conn, HIPD_EDISCONNECTED,
               "disconnected from hipd (ringing its ring's doorbell: %s)",
               strerror(e ? e : EIO));
}

/*
 * As io owner (lock held on entry and exit, dropped while polling), read
 * replies until @p call is done, the connection breaks, a sender wants the
 * socket or @p deadline passes. @return 0, or HIPD_ETIMEDOUT.
 */
/* Spins in a row that found nothing before the spin is skipped. */
#define SPIN_MISSES_TO_SKIP 8

int conn_io_receive(hipd_conn_t *conn, hipd_call_t *call, int64_t deadline)
{
  int polled = 0;

  for (;;) {
    struct pollfd pfd[2];
    int timeout, n, e, spin, futex, slept = 0;
    conn_ring_t *ring = conn->ring;

    if (!conn->io_busy) {
      /* Someone cleared it while we read: a second reader would race us
       * for the bytes. Say so rather than lose replies. */
      conn_break(conn, HIPD_EINTERNAL,
                 "libhipd: internal error: another thread took the socket "
                 "from its reader");
      return 0;
    }
    if (ring != NULL && conn_ring_reap(conn) < 0)
      return 0; /* broken: the pending calls completed with the reason */
    if (ring != NULL && !conn->broken && conn_ring_kick_wanted(ring))
      conn_ring_kick(conn); /* it stopped with submissions waiting */
    if (call->state == CALL_DONE || conn->broken || conn->send_waiters > 0)
      return 0;
    timeout = conn_remaining_ms(deadline);
    if (timeout == 0 && polled)
      return HIPD_ETIMEDOUT;
    polled = 1;
    pfd[0] = (struct pollfd){.fd = conn->fd, .events = POLLIN};
    pfd[1] = (struct pollfd){.fd = conn->wake_fd, .events = POLLIN};
    /* A look without waiting (hipd_call_done, deadline 0) never spins. */
    spin = deadline == 0 ? 0 : conn->busy_poll_us;
    /* When the answers have come later than the spin lasts, eight times
     * in a row (many sessions sharing a worker, long kernels), the spin
     * only burns a CPU others need: skip it, but for one in 16 waits,
     * which looks whether they come sooner again. */
    if (spin > 0 && conn->spin_misses >= SPIN_MISSES_TO_SKIP &&
        (++conn->spin_skipped & 15) != 0)
      spin = 0;
    /* A copy's answer comes after the copy: spin through it too (a 1 MiB
     * copy takes longer than the spin alone, and the wake-up after it
     * cost a quarter of its rate). */
    if (spin > 0)
      spin += (int)call->spin_extra_us;
    /* The futex doorbell only while nothing is due on the socket: the
     * daemon wakes it when it writes, not each time the rest of a long
     * reply gets into the socket. A call sent later wakes us
     * (conn_wake_owner). Otherwise we sleep on the socket, and ask for
     * ring.wake (RING_ASLEEP_SOCKET), so that a completion for another
     * thread does not wait for that answer. */
    futex = ring != NULL && ring->futex && conn->sock_calls == 0 &&
            conn->dcall == NULL && conn->rlen == 0;
    pthread_mutex_unlock(&conn->lock);
    n = 0;
    if (spin > 0) {
      /* A reply due within microseconds is read without the wake-up
       * latency of a sleeping thread (as HIP's own synchronisation spins
       * before it yields); a completion on the ring is seen without a
       * system call. */
      int64_t until = (int64_t)util_now_ns() + (int64_t)spin * 1000;
      if (ring != NULL) {
        unsigned k = 0;
        while (conn_ring_peek(ring) == NULL &&
               (++k % 64 != 0 || (n = poll(pfd, 2, 0)) == 0) &&
               (int64_t)util_now_ns() < until)
          util_cpu_relax();
      } else {
        while ((n = poll(pfd, 2, 0)) == 0 && (int64_t)util_now_ns() < until)
          ;
      }
    }
    if (spin > 0) {
      /* Only the io owner reads and writes these. */
      if (n != 0 || (ring != NULL && conn_ring_peek(ring) != NULL))
        conn->spin_misses = conn->spin_skipped = 0;
      else if (conn->spin_misses < SPIN_MISSES_TO_SKIP)
        conn->spin_misses++;
    }
    if (ring != NULL && n == 0 && conn_ring_peek(ring) != NULL) {
      pthread_mutex_lock(&conn->lock);
      continue; /* reaped at the top */
    }
    if (n == 0 && ring != NULL) {
      /* Sleep on the socket, or on cq_wait with the futex doorbell; the
       * daemon wakes us if a completion comes meanwhile. */
      if (!conn_ring_sleep(ring, ring->futex && !futex)) {
        pthread_mutex_lock(&conn->lock);
        continue;
      }
      slept = 1;
      if (futex && (n = poll(pfd, 2, 0)) == 0) {
        /* Anything written to the socket or the eventfd after that look
         * moves cq_wait off 1 and wakes us (ring_layout.h). */
        proto_ring_futex_wait(&ring->hdr->cq_wait, RING_ASLEEP,
                              timeout < 0 || timeout > RING_FUTEX_SLEEP_MS
                                  ? RING_FUTEX_SLEEP_MS
                                  : timeout);
        conn_ring_awake(ring);
        pthread_mutex_lock(&conn->lock);
        if (conn_ring_peek(ring) != NULL)
          continue; /* reaped at the top */
        pthread_mutex_unlock(&conn->lock);
        slept = 0;
        n = poll(pfd, 2, 0);
        if (n == 0) {
          pthread_mutex_lock(&conn->lock);
          continue; /* the deadline is looked at on top */
        }
      }
    }
    if (n == 0)
      n = poll(pfd, 2, timeout);
    e = errno;
    if (slept)
      conn_ring_awake(ring);
    if (n > 0 && pfd[1].revents != 0)
      conn_wake_drain(conn);
    if (n > 0 && pfd[0].revents != 0)
      conn_io_recv(conn); /* a failure breaks the connection, seen above */
    pthread_mutex_lock(&conn->lock);
    if (n < 0 && e != EINTR)
      conn_break(conn, HIPD_EDISCONNECTED, "disconnected from hipd (poll: %s)",
                 strerror(e));
  }
}
