/* SPDX-License-Identifier: MIT */
/* daemon/transport_ring.c: polling the sessions' rings and running their
 * submissions through dispatch. See transport_ring.h. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "executor.h"
#include "log.h"
#include "loop_turn.h"
#include "ring.h"
#include "rpc.h"
#include "spin.h"
#include "transport_ring.h"

/* What the params' decoding allocates for the submission being run (loop
 * thread only). */
static msgpack_zone ring_zone;

/*
 * A session's last submission, decoded. A client repeats its requests
 * (the same launch of the same kernel on the same buffers, a wait after
 * each): a submission whose bytes are the last one's but for the msgid is
 * neither scanned against the limits nor decoded again, as those bytes
 * passed the scan and decode to the same objects (msgpack is read without
 * context: [0, msgid, method, params] with the same method and params
 * bytes is the same request). Of the scan's limits only --max-depth can
 * change (a reload), and can matter in a slot: a change makes a miss. Scanning
 * and decoding were about 3,000 of the 9,000 instructions the loop spends on a
 * ring's kernel launch (callgrind, bench/RESULTS.md). The objects point into
 * this copy of the bytes, not into the ring's (e->data is the ring's until its
 * next take), and dispatch only reads them; what the params' decoding allocates
 * goes to ring_zone, cleared for each submission.
 */
typedef struct ring_decoded {
  uint8_t data[RING_SQE_DATA]; /* the message */
  uint32_t len;                /* its bytes */
  uint32_t rest;               /* where the bytes after the msgid start */
  msgpack_zone zone;           /* its objects */
  proto_msg_t msg;             /* as proto_msg_decode() gave it */
  unsigned max_depth;          /* the limit it was scanned under (a reload
                                  may lower it: then it is scanned again) */
  int valid;                   /* msg is data's */
} ring_decoded_t;

/* Where the bytes after the msgid of request @p p (@p len bytes) start,
 * with the msgid in *@p msgid: 0 unless it starts [0, msgid as a msgpack
 * unsigned integer of at most 32 bits]. */
static uint32_t request_rest(const uint8_t *p, uint32_t len, uint32_t *msgid)
{
  if (len < 4 || p[0] != 0x94 || p[1] != 0x00)
    return 0;
  if (p[2] <= 0x7f) {
    *msgid = p[2];
    return 3;
  }
  switch (p[2]) {
  case 0xcc:
    *msgid = p[3];
    return 4;
  case 0xcd:
    if (len < 6)
      return 0;
    *msgid = (uint32_t)p[3] << 8 | p[4];
    return 5;
  case 0xce:
    if (len < 8)
      return 0;
    *msgid = (uint32_t)p[3] << 24 | (uint32_t)p[4] << 16 | (uint32_t)p[5] << 8 |
             p[6];
    return 7;
  default: /* 64-bit msgids and anything else: the full decode */
    return 0;
  }
}

/* @p s's last submission decoded, if @p e is the same request but for its
 * msgid: *@p msg is then its message with @p e's msgid. */
static int decoded_again(session_t *s, const ring_sqe_t *e, proto_msg_t *msg)
{
  const ring_decoded_t *d = s->ring_dec;
  uint32_t msgid = 0, rest;

  if (d == NULL || !d->valid || d->max_depth != s->d->cfg.limits.max_depth)
    return 0;
  rest = request_rest(e->data, e->len, &msgid);
  if (rest == 0 || e->len - rest != d->len - d->rest ||
      memcmp(e->data + rest, d->data + d->rest, e->len - rest) != 0)
    return 0;
  *msg = d->msg;
  msg->msgid = msgid;
  return 1;
}

/* Scan and decode @p e into @p s's ring_decoded_t. @return 0, or -1 with
 * the session closed (the client broke its ring). */
static int decode_new(session_t *s, const ring_sqe_t *e, proto_msg_t *msg)
{
  ring_decoded_t *d = s->ring_dec;
  const char *reason = NULL;
  size_t need = 0;
  long long n;
  char why[200];
  uint32_t msgid;

  n = proto_frame_scan(&s->d->cfg.limits, e->data, e->len, &need, &reason);
  if (n != (long long)e->len) {
    snprintf(why, sizeof(why), "protocol violation: a ring submission %s",
             n < 0    ? reason
             : n == 0 ? "is not a whole message"
                      : "holds more than one message");
    session_close(s, why);
    return -1;
  }
  if (d == NULL) {
    if ((d = calloc(1, sizeof(*d))) == NULL ||
        !msgpack_zone_init(&d->zone, 1024)) {
      free(d);
      session_close(s, "out of memory decoding a ring submission");
      return -1;
    }
    s->ring_dec = d;
  }
  d->valid = 0;
  msgpack_zone_clear(&d->zone);
  memcpy(d->data, e->data, e->len);
  d->len = e->len;
  if (proto_msg_decode(d->data, d->len, &d->zone, &d->msg, &reason) != 0) {
    snprintf(why, sizeof(why), "protocol violation: a ring submission: %s",
             reason);
    session_close(s, why);
    return -1;
  }
  *msg = d->msg;
  d->max_depth = s->d->cfg.limits.max_depth;
  d->rest = request_rest(d->data, d->len, &msgid);
  d->valid = d->msg.type == PROTO_REQUEST && d->rest != 0;
  return 0;
}

static void rings_check_cb(uv_check_t *h);
static void rings_prepare_cb(uv_prepare_t *h);

/* Decode one submission, copied out of the ring, and dispatch it. A
 * submission that is not one whole request breaks the ring: it cannot be
 * answered (it has no msgid), so the session closes, as a socket's would. */
static void run_one(session_t *s, const ring_sqe_t *e, int on_cq)
{
  proto_msg_t msg;

  if (!decoded_again(s, e, &msg) && decode_new(s, e, &msg) != 0)
    return;
  if (msg.type != PROTO_REQUEST) {
    session_close(s, "protocol violation: a ring submission that is not a "
                     "request");
    return;
  }
  s->requests++;
  spin_note_work();
  msgpack_zone_clear(&ring_zone);
  dispatch_ring_request(s, &ring_zone, on_cq, msg.msgid, msg.method,
                        msg.method_len, msg.params);
}

static void poll_start(session_t *s)
{
  daemon_t *d = s->d;

  if (s->ring_polled)
    return;
  s->ring_polled = 1;
  session_incref(s);
  list_insert_tail(&d->rings, &s->ring_node);
  if (!d->rings_polling) {
    d->rings_polling = 1;
    uv_check_start(&d->ring_check, rings_check_cb);
    uv_prepare_start(&d->ring_prepare, rings_prepare_cb);
  }
}

static void poll_stop(session_t *s)
{
  if (!s->ring_polled)
    return;
  s->ring_polled = 0;
  list_remove(&s->ring_node);
  list_init(&s->ring_node);
  session_decref(s);
}

int transport_ring_run(session_t *s)
{
  const ring_sqe_t *e;
  int rc = RING_EMPTY, ran = 0, on_cq;

  if (s->ring == NULL || s->closing)
    return RING_EMPTY;
  session_incref(s);
  while (!s->closing &&
         (rc = ring_next(s, s->sock_requests, &e, &on_cq)) == RING_TAKEN) {
    run_one(s, e, on_cq);
    ran = 1;
  }
  if (rc < 0) {
    session_close(s, ring_broken_why(s));
  } else if (!s->closing) {
    s->ring_stalled = rc == RING_WAIT_INFLIGHT;
    if (ran)
      poll_start(s);
  }
  session_decref(s);
  return rc;
}

void transport_ring_kick(session_t *s)
{
  if (s->ring == NULL || s->closing)
    return;
  ring_kicked(s);
  ring_wake(s);
  poll_start(s);
  /* The ring is awake: the loop must look at it before it blocks, even
   * when this comes after the rings' prepare callback of this turn (a
   * kick read by a resumed session at the safe point). */
  loop_turn_stay_awake(s->d);
  transport_ring_run(s);
}

void transport_ring_forget(session_t *s)
{
  poll_stop(s);
  ring_close(s);
  if (s->ring_dec != NULL) {
    msgpack_zone_destroy(&s->ring_dec->zone);
    free(s->ring_dec);
    s->ring_dec = NULL;
  }
}

int transport_rings_pending(daemon_t *d)
{
  for (list_node_t *n = d->rings.next; n != &d->rings; n = n->next)
    if (ring_ready(list_entry(n, session_t, ring_node)))
      return 1;
  return 0;
}

/* Every loop iteration while some ring is polled: run each. A ring stays
 * polled while the loop runs (its iterations look at it for free, and the
 * --busy-poll spin between them too: main.c); it sleeps only when the loop
 * is about to block (rings_prepare_cb), or when it waits for the socket or
 * for its calls, which run it again. */
static void rings_check_cb(uv_check_t *h)
{
  daemon_t *d = h->data;
  list_node_t *n, *next;

  exec_bridge_run(); /* answered early: finished first (transport.c) */
  for (n = d->rings.next; n != &d->rings; n = next) {
    session_t *s = list_entry(n, session_t, ring_node);
    int rc;

    session_incref(s);
    rc = transport_ring_run(s);
    next = n->next; /* s stays linked, or poll_stop() below unlinks it */
    if (s->closing || s->ring == NULL || rc == RING_WAIT_SOCKET ||
        rc == RING_WAIT_INFLIGHT)
      poll_stop(s); /* the socket or a completion runs it again */
    session_decref(s);
  }
  if (list_empty(&d->rings) && d->rings_polling) {
    d->rings_polling = 0;
    uv_check_stop(&d->ring_check);
    uv_prepare_stop(&d->ring_prepare);
  }
}

/* Before the loop polls: if it may block, the rings it polls go to sleep
 * (sq_kick, then one more look); one that got a submission meanwhile keeps
 * the loop from blocking this time. A ring left awake must never meet a
 * blocked loop: its client rings no doorbell (sq_kick is 0) and would
 * wait for the next timer (check_ring's test_reads_nothing found it). */
static void rings_prepare_cb(uv_prepare_t *h)
{
  daemon_t *d = h->data;
  list_node_t *n, *next;

  if (!loop_turn_may_block(d))
    return; /* it will not block: the check phase looks at them */
  for (n = d->rings.next; n != &d->rings; n = next) {
    session_t *s = list_entry(n, session_t, ring_node);

    next = n->next;
    if (ring_sleep(s))
      poll_stop(s);
    else
      loop_turn_stay_awake(d);
  }
}

void transport_ring_init(daemon_t *d)
{
  list_init(&d->rings);
  if (!msgpack_zone_init(&ring_zone, 4096))
    log_error(0, "out of memory for the rings' zone");
  uv_check_init(d->loop, &d->ring_check);
  uv_prepare_init(d->loop, &d->ring_prepare);
  d->ring_check.data = d->ring_prepare.data = d;
  d->rings_polling = 0;
}

void transport_ring_close(daemon_t *d)
{
  while (!list_empty(&d->rings))
    poll_stop(list_entry(d->rings.next, session_t, ring_node));
  uv_check_stop(&d->ring_check);
  uv_prepare_stop(&d->ring_prepare);
  uv_close((uv_handle_t *)&d->ring_check, NULL);
  uv_close((uv_handle_t *)&d->ring_prepare, NULL);
  msgpack_zone_destroy(&ring_zone);
}
