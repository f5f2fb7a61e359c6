/* SPDX-License-Identifier: MIT */
/* daemon/ring.h: a session's shared-memory submission and completion
 * queues (proto/ring_layout.h has the layout and the rules of the doorbells).
 *
 * This is the ring as data: mapping the client's memfd, taking one
 * submission at a time (copied out of shared memory before anything looks
 * at it, under the checks that protect the daemon from the client's
 * indices), and publishing one completion. The transport polls the rings
 * and hands what it takes to dispatch (transport_ring.c); a call that came
 * from a ring is answered here (ring_reply(), from call.c). All on the loop
 * thread, but ring_reply_nil(): a launch or a synchronisation waited for
 * by a stream's thread is answered from that thread (call.h's early
 * answers), so that the client's wake-up does not wait for the loop's.
 */
#ifndef HIPD_RING_H
#define HIPD_RING_H

#include <stddef.h>
#include <stdint.h>

#include "ring_layout.h"
#include "session.h"
#include "util/err.h"

/* What ring_next() found. */
enum ring_state {
  RING_EMPTY = 0,        /* nothing submitted */
  RING_TAKEN = 1,        /* a submission is in *out */
  RING_WAIT_SOCKET = 2,  /* the next one follows socket requests not read */
  RING_WAIT_INFLIGHT = 3 /* --max-inflight calls of the session are running */
};

typedef struct ring ring_t;

/* ring.open: take @p fd (closed on failure too), a memfd of the peer's
 * sealed against shrinking and at least proto_ring_size(@p entries) bytes,
 * map it, fault it in and write the header; attach it to @p s (one ring
 * per session). @p futex: its client sleeps on the futex doorbell, not on
 * the socket (ring_layout.h). @return 0, or a code with the reason in
 * @p err. */
int ring_open(session_t *s, int fd, uint64_t entries, int futex,
              hipd_err_t *err);

/* Take the next submission of @p s's ring, if the client's indices allow
 * it, the session has fewer than --max-inflight calls running and its
 * `after` is at most @p sock_requests (the socket requests read so far).
 * *@p on_cq says where its answer goes: 1, a completion (one is reserved
 * for it), or 0 when the completions owed and unread fill the queue (a
 * client that does not read them): the socket, as a plain response.
 * @return RING_TAKEN with *@p out (valid until the next call), another
 * enum ring_state, or a negative code when the client broke the ring (the
 * reason in ring_broken_why(); the caller closes the session). */
int ring_next(session_t *s, uint64_t sock_requests, const ring_sqe_t **out,
              int *on_cq);

/* Could ring_next() take a submission of @p s's ring now (a hint: one
 * load)? */
int ring_ready(const session_t *s);

/* The reason of the last negative ring_next(). */
const char *ring_broken_why(const session_t *s);

/* Stop polling @p s's ring: set sq_kick, then look again. @return 1 when
 * it sleeps (the client kicks after its next submission), 0 when a
 * submission arrived meanwhile (the kick flag is cleared again). */
int ring_sleep(session_t *s);

/* The ring is being polled again (a kick came): clear sq_kick. */
void ring_wake(session_t *s);

/* Answer a call that came from @p s's ring with a completion reserved for
 * it (ring_next()'s on_cq): the packed response @p data (@p len bytes,
 * malloc'd) and its @p tail (NULL or malloc'd), both freed here, become
 * one completion; an answer larger than a slot becomes the error
 * HIPD_EMSGSIZE for @p msgid. A ring already closed (the session went)
 * drops the answer. Wakes the client when it sleeps, by its doorbell. */
void ring_reply(session_t *s, uint32_t msgid, char *data, size_t len,
                void *tail, size_t tail_len);

/* What ring_reply_nil() did. */
enum ring_early {
  RING_EARLY_NONE = 0, /* nothing: the ring closed, or no answer is owed */
  RING_EARLY_SENT = 1, /* the answer is published (and the client woken) */
  RING_EARLY_WAKE = 2  /* published; the client sleeps on its socket and
                        * the loop must send it ring.wake (ring_wake_socket) */
};

/* A reference on @p s's ring for answers from another thread
 * (ring_reply_nil), or NULL when it takes none: no ring, a closing
 * session, or a client that sleeps on its socket doorbell (whose wake-up
 * the loop writes). The ring's memory stays until the last reference goes,
 * even after ring_close(), which stops the answers. Loop thread. */
ring_t *ring_early_ref(session_t *s);
/* Drop a reference from ring_early_ref(). NULL is a no-op. Loop thread. */
void ring_early_unref(ring_t *r);
/* Any thread: publish the answer nil for @p msgid into one of the
 * completions owed (ring_next()'s on_cq), and wake the client if it
 * sleeps on the futex doorbell. The loop must then not answer the call
 * again (call.c). @return an enum ring_early. */
int ring_reply_nil(ring_t *r, uint32_t msgid);
/* Send ring.wake on @p s's socket (RING_EARLY_WAKE). Loop thread. */
void ring_wake_socket(session_t *s);

/* The daemon is writing to @p s's socket: a client asleep on the futex
 * doorbell is woken to read it (nothing for a socket doorbell). */
void ring_nudge(session_t *s);

/* A ring's counters, for session.info's "ring" map (PROTOCOL.md). */
typedef struct {
  uint64_t entries;    /* slots per queue, 0 without a ring */
  uint64_t taken;      /* submissions run */
  uint64_t completed;  /* completions published */
  uint64_t overflowed; /* submissions answered on the socket, no room */
  uint64_t early;      /* completions published early (ring_reply_nil) */
  uint64_t kicks;      /* ring.kick notifications read (ring_kicked) */
} ring_counts_t;

/* Fill @p out with @p s's ring's counters (all 0 without a ring). */
void ring_counts(const session_t *s, ring_counts_t *out);
/* A ring.kick came from the client (transport_ring_kick): counted. */
void ring_kicked(session_t *s);

/* At the session's teardown: unmap and free the ring (later answers of
 * its calls are dropped). */
void ring_close(session_t *s);

#endif
