/* SPDX-License-Identifier: MIT */
/* daemon/ring.c: a session's shared-memory submission and completion
 * queues. See ring.h; the layout is proto/ring_layout.h. */
#include "config.h"

#define _GNU_SOURCE 1
#include <errno.h>
#include <msgpack.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hipd.h"
#include "log.h"
#include "ring.h"
#include "rpc.h"
#include "shm.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

struct ring {
  /* Publishing a completion: the loop (ring_reply) and, for an answer
   * sent early (ring_reply_nil), the thread that saw the device finish.
   * It guards cq_tail, cq_res, completed, the slots from cq_tail on, and
   * m and hdr, which ring_close() clears. */
  pthread_mutex_t mu;
  unsigned early_refs; /* early answers that may still come (loop thread);
                        * the struct outlives ring_close() until 0 */
  int closed;          /* ring_close() ran (loop thread) */
  shm_t *m;            /* the client's memfd, mapped */
  ring_hdr_t *hdr;     /* its header page */
  ring_sqe_t *sq;      /* its queues */
  ring_cqe_t *cq;
  uint32_t entries;    /* slots per queue, a power of two */
  int futex;           /* the client sleeps on the futex doorbell */
  uint32_t sq_head;    /* ours: submissions taken (copied out) */
  uint32_t cq_tail;    /* ours: completions published */
  uint32_t cq_res;     /* ours: completions owed (answers on the ring) */
  int pending;         /* pend holds a submission taken but not run */
  ring_sqe_t pend;     /* the copy of the submission being looked at */
  uint64_t completed;  /* completions published */
  uint64_t taken;      /* submissions run */
  uint64_t overflowed; /* of them, answered on the socket (no room) */
  uint64_t early;      /* of the completions, published by ring_reply_nil */
  uint64_t kicks;      /* ring.kick notifications read (loop thread) */
  char why[160];       /* why the client broke the ring */
};

int ring_open(session_t *s, int fd, uint64_t entries, int futex,
              hipd_err_t *err)
{
  ring_t *r = NULL;
  shm_t *m = NULL;
  size_t size;
  int rc;

  err_clear(err);
  if (s->ring != NULL) {
    close(fd);
    return err_set(err, HIPD_EEXIST, "the session has a ring already");
  }
  if (!proto_ring_entries_ok(entries)) {
    close(fd);
    return err_set(
        err, HIPD_EINVAL, "entries %llu is not a power of two from %u to %u",
        (unsigned long long)entries, RING_MIN_ENTRIES, RING_MAX_ENTRIES);
  }
  size = proto_ring_size((uint32_t)entries);
  if ((rc = shm_open_fd(fd, size, s->peer_uid, &m, err)) != 0)
    return rc;
  /* Fault every page in now: a page the kernel cannot give later (a
   * hugetlb memfd whose pool ran dry) is an error here rather than a
   * SIGBUS on the loop thread. The memfd cannot shrink, so what is in
   * stays. */
  if (madvise(m->addr, size, MADV_POPULATE_WRITE) != 0) {
    rc = err_set(err, errno == ENOMEM ? HIPD_ENOMEM : HIPD_EINVAL,
                 "cannot fault in the ring's %zu bytes: %s", size,
                 strerror(errno));
    goto fail;
  }
  if ((r = calloc(1, sizeof(*r))) == NULL) {
    rc = err_set(err, HIPD_ENOMEM, "out of memory");
    goto fail;
  }
  pthread_mutex_init(&r->mu, NULL);
  r->m = m;
  r->hdr = m->addr;
  r->entries = (uint32_t)entries;
  r->futex = futex;
  r->sq = proto_ring_sq(m->addr);
  r->cq = proto_ring_cq(m->addr, r->entries);
  /* The client starts its indices at 0; ours start there whatever it
   * wrote, and we never read back what we write. */
  r->hdr->magic = RING_MAGIC;
  r->hdr->version = RING_VERSION;
  r->hdr->entries = r->entries;
  r->hdr->slot = RING_SLOT;
  atomic_store_explicit(&r->hdr->sq_head, 0, memory_order_relaxed);
  atomic_store_explicit(&r->hdr->cq_tail, 0, memory_order_relaxed);
  /* Not polled until the first kick. */
  atomic_store_explicit(&r->hdr->sq_kick, 1, memory_order_seq_cst);
  s->ring = r;
  return 0;

fail:
  shm_unref_now(m);
  return rc;
}

static int broken(ring_t *r, const char *fmt, unsigned long long a,
                  unsigned long long b)
{
  snprintf(r->why, sizeof(r->why), fmt, a, b);
  return HIPD_EPROTO;
}

int ring_next(session_t *s, uint64_t sock_requests, const ring_sqe_t **out,
              int *on_cq)
{
  ring_t *r = s->ring;
  uint32_t tail, head, published;
  int rc = RING_TAKEN;

  *out = NULL;
  *on_cq = 0;
  if (r == NULL || r->hdr == NULL)
    return RING_EMPTY;
  if (!r->pending) {
    tail = atomic_load_explicit(&r->hdr->sq_tail, memory_order_acquire);
    if (tail == r->sq_head)
      return RING_EMPTY;
    if (tail - r->sq_head > r->entries)
      return broken(r,
                    "protocol violation: ring submission tail %llu is more "
                    "than a ring ahead of the %llu taken",
                    tail, r->sq_head);
    /* Copied out before anything looks at it: the client may rewrite
     * the slot from now on without changing what runs. */
    memcpy(&r->pend, &r->sq[r->sq_head & (r->entries - 1)], sizeof(r->pend));
    r->sq_head++;
    atomic_store_explicit(&r->hdr->sq_head, r->sq_head, memory_order_release);
    r->pending = 1;
    if (r->pend.len == 0 || r->pend.len > RING_SQE_DATA)
      return broken(r,
                    "protocol violation: ring submission %llu has a length "
                    "of %llu bytes",
                    r->sq_head - 1, r->pend.len);
  }
  /* The client's cq_head is looked at each time, before anything waits:
   * a submission held back (its `after`, --max-inflight) must not keep an
   * impossible head from being seen. */
  head = atomic_load_explicit(&r->hdr->cq_head, memory_order_acquire);
  /* One hold of the lock a submission: the completions published (by
   * another thread too: ring_reply_nil) and the reservation. */
  pthread_mutex_lock(&r->mu);
  published = r->cq_tail;
  if (published - head > r->entries)
    rc = HIPD_EPROTO;
  else if (r->pend.after > sock_requests)
    rc = RING_WAIT_SOCKET;
  else if (s->inflight >= s->d->cfg.max_inflight)
    rc = RING_WAIT_INFLIGHT;
  else if (r->cq_res - head < r->entries) {
    /* Room for its answer: completions owed and not yet read by the
     * client stay under a ring's worth; beyond, the answer takes the
     * socket. */
    r->cq_res++;
    *on_cq = 1;
  } else {
    r->overflowed++;
  }
  pthread_mutex_unlock(&r->mu);
  if (rc == HIPD_EPROTO)
    return broken(r,
                  "protocol violation: ring completion head %llu is not "
                  "among the %llu completions published",
                  head, published);
  if (rc != RING_TAKEN)
    return rc;
  r->pending = 0;
  r->taken++;
  *out = &r->pend;
  return RING_TAKEN;
}

int ring_ready(const session_t *s)
{
  const ring_t *r = s->ring;

  return r != NULL && r->hdr != NULL && !r->pending &&
         atomic_load_explicit(&r->hdr->sq_tail, memory_order_acquire) !=
             r->sq_head;
}

const char *ring_broken_why(const session_t *s)
{
  return s->ring != NULL ? s->ring->why : "no ring";
}

int ring_sleep(session_t *s)
{
  ring_t *r = s->ring;

  if (r == NULL || r->hdr == NULL)
    return 1;
  atomic_store_explicit(&r->hdr->sq_kick, 1, memory_order_seq_cst);
  if (atomic_load_explicit(&r->hdr->sq_tail, memory_order_seq_cst) ==
      r->sq_head)
    return 1;
  atomic_store_explicit(&r->hdr->sq_kick, 0, memory_order_relaxed);
  return 0;
}

void ring_wake(session_t *s)
{
  if (s->ring != NULL && s->ring->hdr != NULL)
    atomic_store_explicit(&s->ring->hdr->sq_kick, 0, memory_order_seq_cst);
}

/* The client sleeps on the socket: tell it once per sleep. */
static void wake_client(session_t *s)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;
  size_t len;

  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_notify(&pk, RING_WAKE, 0);
  if (sb.data == NULL) {
    session_close(s, "out of memory waking the client of a ring");
    return;
  }
  len = sb.size;
  session_send(s, msgpack_sbuffer_release(&sb), len, NULL, 0);
}

/* Write @p len bytes of @p data, then @p tail_len of @p tail, as the next
 * completion, publish it and wake a client asleep on the futex doorbell.
 * (r->mu, the ring open and a completion owed) @return 1 when the client
 * sleeps on its socket and must be sent ring.wake, else 0. */
static int publish(ring_t *r, const void *data, size_t len, const void *tail,
                   size_t tail_len)
{
  ring_cqe_t *e = &r->cq[r->cq_tail & (r->entries - 1)];

  memcpy(e->data, data, len);
  if (tail != NULL)
    memcpy(e->data + len, tail, tail_len);
  e->len = (uint32_t)(len + tail_len);
  e->flags = 0;
  r->cq_tail++;
  r->completed++;
  atomic_store_explicit(&r->hdr->cq_tail, r->cq_tail, memory_order_seq_cst);
  return proto_ring_wake_sleeper(&r->hdr->cq_wait, r->futex);
}

void ring_reply(session_t *s, uint32_t msgid, char *data, size_t len,
                void *tail, size_t tail_len)
{
  ring_t *r = s->ring;
  int owed, wake;

  if (r == NULL || r->hdr == NULL || s->closing)
    goto out;
  if (len + tail_len > RING_CQE_DATA) {
    msgpack_sbuffer sb;
    msgpack_packer pk;
    size_t n = len + tail_len;

    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_error_response(&pk, msgid, HIPD_EMSGSIZE,
                              "the answer (%zu bytes) does not fit a ring "
                              "completion of %u bytes",
                              n, RING_CQE_DATA);
    free(data);
    free(tail);
    len = sb.size;
    data = msgpack_sbuffer_release(&sb);
    tail = NULL;
    tail_len = 0;
    if (data == NULL || len > RING_CQE_DATA) {
      session_close(s, "out of memory answering a ring submission");
      goto out;
    }
  }
  pthread_mutex_lock(&r->mu);
  owed = r->cq_tail != r->cq_res;
  wake = owed && publish(r, data, len, tail, tail_len);
  pthread_mutex_unlock(&r->mu);
  if (!owed)
    log_error(s->id, "a ring answer that no submission owes (dropped)");
  if (wake)
    wake_client(s);
out:
  free(data);
  free(tail);
}

ring_t *ring_early_ref(session_t *s)
{
  ring_t *r = s->ring;

  if (r == NULL || r->hdr == NULL || !r->futex || s->closing)
    return NULL;
  r->early_refs++;
  return r;
}

static void ring_free(ring_t *r)
{
  pthread_mutex_destroy(&r->mu);
  free(r);
}

void ring_early_unref(ring_t *r)
{
  if (r != NULL && --r->early_refs == 0 && r->closed)
    ring_free(r);
}

int ring_reply_nil(ring_t *r, uint32_t msgid)
{
  proto_smallbuf_t sb = {.len = 0};
  msgpack_packer pk;
  int rc = 0;

  msgpack_packer_init(&pk, &sb, proto_smallbuf_write);
  proto_pack_response(&pk, msgid);
  msgpack_pack_nil(&pk);
  pthread_mutex_lock(&r->mu);
  if (r->hdr != NULL && r->cq_tail != r->cq_res) {
    rc = publish(r, sb.b, sb.len, NULL, 0) ? RING_EARLY_WAKE : RING_EARLY_SENT;
    r->early++;
  }
  pthread_mutex_unlock(&r->mu);
  return rc;
}

void ring_wake_socket(session_t *s)
{
  if (s->ring != NULL && s->ring->hdr != NULL && !s->closing)
    wake_client(s);
}

void ring_nudge(session_t *s)
{
  ring_t *r = s->ring;

  if (r != NULL && r->futex && r->hdr != NULL)
    proto_ring_wake_futex(&r->hdr->cq_wait);
}

void ring_counts(const session_t *s, ring_counts_t *out)
{
  const ring_t *r = s->ring;

  *out = (ring_counts_t){0};
  if (r == NULL)
    return;
  out->entries = r->entries;
  out->taken = r->taken;
  out->kicks = r->kicks;
  pthread_mutex_lock((pthread_mutex_t *)&r->mu);
  out->completed = r->completed;
  out->overflowed = r->overflowed;
  out->early = r->early;
  pthread_mutex_unlock((pthread_mutex_t *)&r->mu);
}

void ring_kicked(session_t *s)
{
  if (s->ring != NULL)
    s->ring->kicks++;
}

void ring_close(session_t *s)
{
  ring_t *r = s->ring;
  shm_t *m;

  if (r == NULL)
    return;
  ring_nudge(s); /* a client asleep looks at its socket, which closes */
  s->ring = NULL;
  /* An early answer may be on its way from another thread: it finds the
   * ring closed, and the struct goes with the last of them. */
  pthread_mutex_lock(&r->mu);
  m = r->m;
  r->m = NULL;
  r->hdr = NULL;
  r->closed = 1;
  pthread_mutex_unlock(&r->mu);
  shm_unref_now(m);
  if (r->early_refs == 0)
    ring_free(r);
}
