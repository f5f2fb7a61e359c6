/* SPDX-License-Identifier: MIT */
/* client/conn_internal.h: the connection's state and the parts of it that
 * its files share: conn.c (connecting, the handshake, closing, settings),
 * conn_error.c (the thread-local last error), conn_call.c (time, the
 * pending-call table, a call's lifetime, breaking the connection),
 * conn_recv.c (receiving and framing replies), conn_send.c (sending
 * requests, corking), conn_wait.c (waiting and pipelining) and
 * conn_decode.c (the common decoders and parameters). Calls among them point
 * one way: conn_wait -> conn_send -> conn_recv -> conn_call -> conn_error
 * (tests/check_cycles.sh). The method wrappers see only conn.h. Private to
 * client/.
 */
#ifndef HIPD_CLIENT_CONN_INTERNAL_H
#define HIPD_CLIENT_CONN_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "conn.h"
#include "ring_layout.h"

struct iovec;

/* The connection's ring (ring.c), when the daemon took one. */
typedef struct conn_ring {
  void *base; /* the mapping */
  size_t size;
  uint32_t entries;
  ring_hdr_t *hdr;
  ring_sqe_t *sq;
  ring_cqe_t *cq;
  uint32_t sq_tail; /* ours: submissions published */
  uint32_t kicked;  /* sq_tail when we last rang the doorbell */
  uint32_t cq_head; /* ours: completions read */
  int futex;        /* the daemon wakes us by FUTEX_WAKE on cq_wait */
} conn_ring_t;

#define ERROR_MAX (64 << 10) /* longest message kept from the daemon */
#define NO_DEADLINE INT64_C(-1)
#define ERR_LEN 1024 /* a thread's short message; messages on the stack */

struct hipd_conn {
  pthread_mutex_t lock;
  pthread_cond_t cond; /* a call completed or the socket was given up */
  unsigned refs;       /* the user's handle + the calls the user holds */
  uint64_t serial;     /* tells this connection from a later one at the
                          same address, for the thread-local messages */
  int fd;              /* the socket; closed only when the memory goes */
  int wake_fd;         /* eventfd: makes a polling io owner let a sender in */
  char *client_name;   /* sent in hello */
  int timeout_ms;      /* per wait; 0: none */
  int busy_poll_us;    /* spin this long for a reply before sleeping */
  /* The io owner's: spins in a row that ended with nothing (the answers
   * come later than the spin lasts), and whether spins are skipped for
   * that (conn_io_receive). */
  unsigned spin_misses;
  unsigned spin_skipped;
  /* What copies between a shared buffer and device memory took lately, in
   * picoseconds a byte (0: none timed yet); atomic. How long a wait for a
   * copy spins beyond a round trip's (conn_xfer_spin_us). */
  uint32_t xfer_ps_per_byte;
  int broken;            /* 0, or the code the pending calls failed with */
  char broken_msg[512];  /* and their message */
  int told;              /* session.closed's code (its reason is broken_msg) */
  int io_busy;           /* a thread owns the socket */
  unsigned send_waiters; /* threads waiting for the socket to send */
  uint32_t next_msgid;   /* wraps; ids still pending are skipped */
  hipd_call_t **table;   /* pending and abandoned calls, by msgid */
  size_t table_size;     /* buckets, a power of 2 */
  size_t npending;       /* calls in the table */
  size_t sock_calls;     /* of them, sent on the socket (on_socket) */
  /* The receive side, used only by the io owner. */
  uint8_t *rbuf;         /* bytes received and not yet dispatched */
  size_t rlen;           /* bytes in rbuf */
  size_t rcap;           /* size of rbuf */
  size_t rneed;          /* the message at rbuf needs at least this much */
  proto_limits_t limits; /* for replies */
  msgpack_zone zone;     /* objects of the reply being dispatched */
  /* Corked requests (hipd_cork), written together later. */
  unsigned corked; /* hipd_cork() nesting depth */
  char *obuf;      /* whole requests not yet written */
  size_t olen, ocap;
  /* A large reply being received straight into its caller's buffer (the
   * io owner's, under the lock): its call, out of the table. */
  hipd_call_t *dcall;
  uint8_t *ddst; /* where the payload goes; NULL: discarded (abandoned) */
  size_t dlen, dgot;
  /* The ring (proto/ring_layout.h): NULL when the connection has none. */
  conn_ring_t *ring;
  uint64_t sock_sent; /* requests written on the socket (or corked): a
                         ring submission's `after` */
};

/* conn_error.c: the calling thread's last error for @p conn (may be NULL:
 * connect failures), from the printf-style message. */
void conn_err_setv(const hipd_conn_t *conn, const char *fmt, va_list ap);
void conn_err_set(const hipd_conn_t *conn, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* conn_call.c: time. Deadlines are CLOCK_MONOTONIC nanoseconds
 * (util_now_ns() of util/clock.h); NO_DEADLINE waits forever and a deadline
 * of 0 has always passed. */
/* $HIPD_BUSY_POLL_US, else 20 us on machines with 8 or more CPUs, else 0. */
int conn_default_busy_poll(void);
/* The deadline @p timeout_ms from now (NO_DEADLINE for 0 or less). */
int64_t conn_deadline_after(int timeout_ms);
/* Milliseconds left for poll(), rounded up; -1 for none. */
int conn_remaining_ms(int64_t deadline);
/* How much longer than a round trip the answer to a copy of @p len bytes
 * between a shared buffer and device memory should take, in microseconds,
 * by the copies timed so far (conn_xfer_learn); 0 for small copies or
 * none timed yet; at most CONN_XFER_SPIN_MAX_US. */
uint32_t conn_xfer_spin_us(const hipd_conn_t *conn, size_t len);
/* A synchronous copy of @p len bytes took @p ns from request to answer. */
void conn_xfer_learn(hipd_conn_t *conn, size_t len, uint64_t ns);
/* Wait on the connection's condition variable (lock held) until signalled
 * or @p deadline. @return 0, or HIPD_ETIMEDOUT once the deadline passed. */
int conn_cond_wait_until(hipd_conn_t *conn, int64_t deadline);

/* conn_call.c: the pending table (lock held) */
hipd_call_t *conn_table_find(const hipd_conn_t *conn, uint32_t msgid);
void conn_table_insert(hipd_conn_t *conn, hipd_call_t *call);
/* Take the call of @p msgid out of the table. @return it, or NULL. */
hipd_call_t *conn_table_remove(hipd_conn_t *conn, uint32_t msgid);
/* The next free msgid (ids wrap; one still pending is skipped). */
uint32_t conn_msgid_next(hipd_conn_t *conn);

/* conn_call.c: lifetimes */
/* Free the connection (no reference left). */
void conn_destroy(hipd_conn_t *conn);
/* Drop a reference (lock not held); the last one frees the connection. */
void conn_unref(hipd_conn_t *conn);
/* Free a call's memory (its body is already gone). Touches no connection. */
void conn_call_destroy(hipd_call_t *call);
/* Wake an io owner blocked in poll() (harmless when there is none). */
void conn_wake_owner(hipd_conn_t *conn);
/* Consume the wake-ups of the eventfd. */
void conn_wake_drain(hipd_conn_t *conn);
/* Break the connection (lock held): the first reason sticks. Every pending
 * call completes with @p code and the printf-style message. */
void conn_break(hipd_conn_t *conn, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* As conn_break(), for a reason the daemon gave (session.refused): each
 * pending call's message is "METHOD: " and the reason, as if the daemon had
 * answered it so. */
void conn_break_answered(hipd_conn_t *conn, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The message for a call made after the connection broke (lock held). */
void conn_broken_message(const hipd_conn_t *conn, char *buf, size_t size);

/* ring.c, the ring as data (lock held) */
/* Make a memfd of a ring of @p entries slots per queue, sized, sealed and
 * mapped. @return 0 with *@p out and *@p fd (the caller sends it, then
 * closes it), or a code. */
int conn_ring_map(uint32_t entries, conn_ring_t **out, int *fd);
void conn_ring_unmap(conn_ring_t *r);
/* Put the request in @p iov (head and params) in the submission queue and
 * publish it, to run after @p after socket requests. @return 1, or 0 when
 * the queue is full or the request does not fit a slot (send it on the
 * socket). */
int conn_ring_put(conn_ring_t *r, uint64_t after, const struct iovec *iov,
                  size_t niov);
/* Does the daemon want a ring.kick (it stopped polling, submissions wait)? */
int conn_ring_kick_wanted(const conn_ring_t *r);
/* The next completion, or NULL; conn_ring_pop() once dispatched. */
const ring_cqe_t *conn_ring_peek(const conn_ring_t *r);
void conn_ring_pop(conn_ring_t *r);
/* About to sleep, on cq_wait with the futex doorbell, or on the socket
 * (the socket doorbell, or @p on_socket: an answer is due there, so the
 * futex doorbell's ring is woken with ring.wake too): ask to be woken.
 * @return 1, or 0 when a completion came meanwhile (do not sleep).
 * conn_ring_awake() after. */
int conn_ring_sleep(conn_ring_t *r, int on_socket);
void conn_ring_awake(conn_ring_t *r);
/* Wake an io owner asleep on the futex doorbell (any thread; nothing when
 * it does not sleep there). */
void conn_ring_nudge(conn_ring_t *r);

/* conn_recv.c */
/* Dispatch the completions the ring has (io owner, lock held). @return
 * how many, or a negative code once the connection is broken. */
int conn_ring_reap(hipd_conn_t *conn);
/* Send the notification ring.kick (io owner, lock held; released while
 * writing). A failure breaks the connection. */
void conn_ring_kick(hipd_conn_t *conn);
/* Read what the socket has, without blocking, and dispatch the complete
 * replies (io owner, lock not held). @return the bytes read (> 0), 0 if
 * none were ready, or a negative code once the connection is broken. */
ssize_t conn_io_recv(hipd_conn_t *conn);
/* As io owner (lock held on entry and exit, dropped while polling), read
 * replies until @p call is done, the connection breaks, a sender wants the
 * socket or @p deadline passes. @return 0, or HIPD_ETIMEDOUT. */
int conn_io_receive(hipd_conn_t *conn, hipd_call_t *call, int64_t deadline);

/* conn_send.c */
/* Write the corked requests (lock held on entry and on return; released
 * while writing). @return 0, HIPD_ETIMEDOUT or the code the connection
 * broke with. */
int conn_obuf_flush_locked(hipd_conn_t *conn, int64_t deadline);

#endif
