/* SPDX-License-Identifier: MIT */
/* proto/ring_layout.h: the shared-memory submission path between a client and
 * the daemon process that serves its session (proto/PROTOCOL.md, "Rings").
 *
 * A session may map one ring: a memfd the client creates, sizes and seals
 * (F_SEAL_SHRINK and F_SEAL_GROW) and sends with `ring.open [entries]`.
 * It holds a header page, then a submission queue (SQ) of `entries` slots,
 * then a completion queue (CQ) of as many. Every slot is RING_SLOT bytes.
 *
 * - An SQ slot carries one whole msgpack-rpc request, [0, msgid, method,
 *   params], exactly as it would travel on the socket, and the count of
 *   requests the client had written on the socket before it (`after`): the
 *   daemon runs the two in the order the client issued them. Only the
 *   methods of PROTO_RING_METHODS may come this way.
 * - A CQ slot carries the whole response, [1, msgid, error, result], as
 *   the socket would.
 *
 * So a request on the ring is decoded, checked and answered by the same
 * code, with the same rows, codes and messages, as one on the socket; only
 * the bytes travel differently. The msgids are the connection's: a client
 * matches answers from either path in one table.
 *
 * The indices are free-running 32-bit counters (slot = index % entries).
 * The client writes sq_tail and cq_head; the daemon writes sq_head and
 * cq_tail, and trusts nothing it reads: it copies a slot out before it
 * looks at it, keeps its own copies of the indices, and closes the session
 * when the client's indices are impossible.
 *
 * Doorbells, only when the other side sleeps: the daemon sets sq_kick
 * before it stops polling the SQ, and a client that then publishes a
 * submission sends the notification `ring.kick` on the socket. A client
 * about to sleep sets cq_wait to 1; the daemon that then publishes a
 * completion moves it to 2 and wakes it, by the ring's doorbell:
 * - "socket" (the default): the notification `ring.wake` on the socket,
 *   for a client that sleeps in poll() on it;
 * - "futex" (`ring.open [entries, "futex"]`): FUTEX_WAKE on cq_wait, for a
 *   client that sleeps in FUTEX_WAIT on it. No message is written, nothing
 *   is read: one system call on each side instead of a write and a read
 *   of the socket. As such a client does not see its socket while it
 *   sleeps, the daemon also wakes it so (1 to 2) whenever it writes to
 *   the socket, and the client bounds each sleep (RING_FUTEX_SLEEP_MS) to
 *   notice a daemon that went away without a word.
 * A client that must watch its socket while it sleeps (an answer is due
 * there: the rest of a long reply comes without a wake) sets cq_wait to
 * RING_ASLEEP_SOCKET instead, and a completion wakes it with ring.wake
 * whatever the doorbell.
 * Both re-check their queue after setting the flag.
 *
 * This header is linked by the daemon and the client library alike.
 */
#ifndef HIPD_PROTO_RING_LAYOUT_H
#define HIPD_PROTO_RING_LAYOUT_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define RING_MAGIC 0x676e6972u /* "ring", little-endian */
#define RING_VERSION 1
#define RING_SLOT 512u      /* bytes of one SQ or CQ slot */
#define RING_HDR 4096u      /* the header page */
#define RING_MIN_ENTRIES 8u /* entries: a power of two in [MIN, MAX] */
#define RING_MAX_ENTRIES 1024u
#define RING_DEFAULT_ENTRIES 256u

/* The bytes of a message a slot has room for. */
#define RING_SQE_DATA (RING_SLOT - 16u)
#define RING_CQE_DATA (RING_SLOT - 8u)
/* The longest error message a completion carries (the rest of the slot
 * holds the response around it). */
#define RING_MSG_MAX 400u

/* What cq_wait holds. The client sets it to one of the two ASLEEP values
 * before it sleeps and to RING_AWAKE after; the daemon moves an ASLEEP
 * value to RING_WOKEN when it wakes it. Any other value wakes nothing. */
enum {
  RING_AWAKE = 0,
  RING_ASLEEP = 1,        /* asleep on the ring's doorbell */
  RING_WOKEN = 2,         /* the daemon woke it */
  RING_ASLEEP_SOCKET = 3, /* asleep on the socket, whatever the doorbell */
};

/* The header page. Each index sits in a cache line of its own. */
typedef struct {
  uint32_t magic; /* the daemon writes these four at ring.open */
  uint32_t version;
  uint32_t entries;                     /* slots in each queue */
  uint32_t slot;                        /* RING_SLOT */
  alignas(64) _Atomic uint32_t sq_tail; /* client: submissions published */
  alignas(64) _Atomic uint32_t sq_head; /* daemon: submissions taken */
  alignas(64) _Atomic uint32_t cq_tail; /* daemon: completions published */
  alignas(64) _Atomic uint32_t cq_head; /* client: completions read */
  alignas(64) _Atomic uint32_t sq_kick; /* daemon: 1 = not polling; kick */
  alignas(64) _Atomic uint32_t cq_wait; /* client: RING_ASLEEP*, RING_WOKEN */
} ring_hdr_t;

/* One submission. */
typedef struct {
  uint32_t len;   /* bytes of data: one msgpack-rpc request */
  uint32_t flags; /* 0 */
  uint64_t after; /* socket requests the client wrote before this one */
  uint8_t data[RING_SQE_DATA];
} ring_sqe_t;

/* One completion. */
typedef struct {
  uint32_t len; /* bytes of data: one msgpack-rpc response */
  uint32_t flags;
  uint8_t data[RING_CQE_DATA];
} ring_cqe_t;

_Static_assert(sizeof(ring_hdr_t) <= RING_HDR, "the ring header fits a page");
_Static_assert(sizeof(ring_sqe_t) == RING_SLOT, "an SQ slot is RING_SLOT");
_Static_assert(sizeof(ring_cqe_t) == RING_SLOT, "a CQ slot is RING_SLOT");

/* The bytes a ring of @p entries slots per queue takes. */
static inline size_t proto_ring_size(uint32_t entries)
{
  return RING_HDR + 2 * (size_t)entries * RING_SLOT;
}

/* Is @p entries a ring size ring.open takes? */
static inline int proto_ring_entries_ok(uint64_t entries)
{
  return entries >= RING_MIN_ENTRIES && entries <= RING_MAX_ENTRIES &&
         (entries & (entries - 1)) == 0;
}

/* The SQ and CQ of a ring mapped at @p base with @p entries slots each. */
static inline ring_sqe_t *proto_ring_sq(void *base)
{
  return (ring_sqe_t *)((char *)base + RING_HDR);
}
static inline ring_cqe_t *proto_ring_cq(void *base, uint32_t entries)
{
  return (ring_cqe_t *)((char *)base + RING_HDR + (size_t)entries * RING_SLOT);
}

/* The methods a ring takes: operations on streams and the waits for them,
 * whose requests fit a slot, carry no descriptor and whose answers fit a
 * completion. The daemon's method table marks these rows (M_RING) and
 * answers any other method on a ring with an error; the client library
 * sends these, and only these, on its ring. */
#define PROTO_RING_METHODS(X)                                                  \
  X("event.query")                                                             \
  X("event.record")                                                            \
  X("event.synchronize")                                                       \
  X("kernel.launch")                                                           \
  X("mem.copy")                                                                \
  X("mem.copy_async")                                                          \
  X("mem.memset")                                                              \
  X("mem.memset_async")                                                        \
  X("mem.read_shm")                                                            \
  X("mem.read_shm_async")                                                      \
  X("mem.write_shm")                                                           \
  X("mem.write_shm_async")                                                     \
  X("stream.query")                                                            \
  X("stream.synchronize")

/* Is @p method (NUL-terminated) one of PROTO_RING_METHODS? */
int proto_ring_method(const char *method);

/* The notifications of the doorbells. */
#define RING_KICK "ring.kick"
#define RING_WAKE "ring.wake"

/* The completion doorbells ring.open takes (param 1, `doorbell`) and
 * answers (key `doorbell`). */
#define RING_DOORBELL_SOCKET "socket"
#define RING_DOORBELL_FUTEX "futex"
/* The longest a client sleeps on a futex doorbell before it looks at its
 * socket. */
#define RING_FUTEX_SLEEP_MS 50

/* A completion was published: wake the client asleep on @p cq_wait (the
 * ring's), if it is, moving it to RING_WOKEN. RING_ASLEEP with @p futex
 * (the futex doorbell) gets FUTEX_WAKE; RING_ASLEEP without, and
 * RING_ASLEEP_SOCKET with either, need ring.wake on the socket. Never
 * blocks, whatever the other side wrote there. @return 1 when the caller
 * must send ring.wake, else 0. */
int proto_ring_wake_sleeper(_Atomic uint32_t *cq_wait, int futex);
/* Wake a client asleep on the futex doorbell (RING_ASLEEP), for something
 * other than a completion: a write to its socket, the end of its session,
 * another of its threads. Nothing for any other value of @p cq_wait. */
void proto_ring_wake_futex(_Atomic uint32_t *cq_wait);
/* FUTEX_WAIT on @p word while it holds @p val, for @p timeout_ms at most;
 * it returns when woken, when the word no longer held val, on a timeout or
 * on a signal: the caller looks again in every case. */
void proto_ring_futex_wait(_Atomic uint32_t *word, uint32_t val,
                           int timeout_ms);

#endif
