/* SPDX-License-Identifier: MIT */
/* client/ring.c: the client's side of a session's ring (the layout and
 * the rules are proto/ring_layout.h): the memfd and its mapping, putting
 * one request in the submission queue, taking completions off the
 * completion queue, and the doorbell flags. Data only: the connection's
 * files send the kicks and dispatch the completions (conn_send.c,
 * conn_recv.c), always with the connection's lock held.
 */
#include "config.h"

#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "conn_internal.h"

int conn_ring_map(uint32_t entries, conn_ring_t **out, int *fd_out)
{
  size_t size = proto_ring_size(entries);
  conn_ring_t *r;
  int fd, e;

  *out = NULL;
  *fd_out = -1;
  if ((r = calloc(1, sizeof(*r))) == NULL)
    return HIPD_ENOMEM;
  fd = memfd_create("hipd-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    free(r);
    return errno == ENOMEM ? HIPD_ENOMEM : HIPD_ENOTSUP;
  }
  /* Sealed against shrinking, so that the daemon's mapping never faults. */
  if (ftruncate(fd, (off_t)size) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    goto fail;
  r->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (r->base == MAP_FAILED)
    goto fail;
  r->size = size;
  r->entries = entries;
  r->hdr = r->base;
  r->sq = proto_ring_sq(r->base);
  r->cq = proto_ring_cq(r->base, entries);
  *out = r;
  *fd_out = fd;
  return 0;

fail:
  e = errno;
  close(fd);
  free(r);
  return e == ENOMEM || e == ENOSPC ? HIPD_ENOMEM : HIPD_EIO;
}

void conn_ring_unmap(conn_ring_t *r)
{
  if (r == NULL)
    return;
  munmap(r->base, r->size);
  free(r);
}

int conn_ring_put(conn_ring_t *r, uint64_t after, const struct iovec *iov,
                  size_t niov)
{
  uint32_t head = atomic_load_explicit(&r->hdr->sq_head, memory_order_acquire);
  size_t len = 0;
  ring_sqe_t *e;

  if (r->sq_tail - head >= r->entries)
    return 0; /* full */
  for (size_t i = 0; i < niov; i++)
    len += iov[i].iov_len;
  if (len == 0 || len > RING_SQE_DATA)
    return 0;
  e = &r->sq[r->sq_tail & (r->entries - 1)];
  len = 0;
  for (size_t i = 0; i < niov; i++) {
    memcpy(e->data + len, iov[i].iov_base, iov[i].iov_len);
    len += iov[i].iov_len;
  }
  e->len = (uint32_t)len;
  e->flags = 0;
  e->after = after;
  r->sq_tail++;
  /* kicked names a tail already kicked for: never this new one, even
   * after 2^32 submissions without a kick. */
  if (r->kicked == r->sq_tail)
    r->kicked = r->sq_tail - 1;
  atomic_store_explicit(&r->hdr->sq_tail, r->sq_tail, memory_order_seq_cst);
  return 1;
}

int conn_ring_kick_wanted(const conn_ring_t *r)
{
  /* Once a submission: a kick sent for the last of them is in the socket,
   * and the daemon runs the ring when it reads it (the sender's kick, and
   * then the io owner's look before it waits, found the daemon asleep for
   * the same submission: two kicks a kernel). */
  if (r->kicked == r->sq_tail)
    return 0;
  /* Published (or completions read) before this load: if the daemon
   * stopped polling and something waits, it must be told. */
  atomic_thread_fence(memory_order_seq_cst);
  return atomic_load_explicit(&r->hdr->sq_kick, memory_order_seq_cst) != 0 &&
         atomic_load_explicit(&r->hdr->sq_head, memory_order_acquire) !=
             r->sq_tail;
}

const ring_cqe_t *conn_ring_peek(const conn_ring_t *r)
{
  uint32_t tail = atomic_load_explicit(&r->hdr->cq_tail, memory_order_acquire);

  if (tail == r->cq_head)
    return NULL;
  return &r->cq[r->cq_head & (r->entries - 1)];
}

void conn_ring_pop(conn_ring_t *r)
{
  r->cq_head++;
  atomic_store_explicit(&r->hdr->cq_head, r->cq_head, memory_order_seq_cst);
}

int conn_ring_sleep(conn_ring_t *r, int on_socket)
{
  atomic_store_explicit(&r->hdr->cq_wait,
                        on_socket ? RING_ASLEEP_SOCKET : RING_ASLEEP,
                        memory_order_seq_cst);
  if (conn_ring_peek(r) == NULL)
    return 1;
  atomic_store_explicit(&r->hdr->cq_wait, RING_AWAKE, memory_order_relaxed);
  return 0;
}

void conn_ring_awake(conn_ring_t *r)
{
  atomic_store_explicit(&r->hdr->cq_wait, RING_AWAKE, memory_order_relaxed);
}

void conn_ring_nudge(conn_ring_t *r)
{
  if (r != NULL && r->futex)
    proto_ring_wake_futex(&r->hdr->cq_wait);
}
