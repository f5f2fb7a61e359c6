/* SPDX-License-Identifier: MIT */
/* daemon/transport_ring.h: the transport's side of the sessions' rings:
 * polling them on the loop thread and handing what they carry to
 * dispatch (the ring as data is ring.h). Used by transport.c.
 *
 * A ring that ran a submission is polled at every loop iteration and in
 * the loop's --busy-poll spin between them (main.c), for as long as the
 * loop does not block; when it is about to, the ring sleeps with sq_kick
 * set until the client's `ring.kick`. A ring that waits for the session's
 * socket requests or for its calls in flight (--max-inflight) is run again
 * by those events.
 */
#ifndef HIPD_TRANSPORT_RING_H
#define HIPD_TRANSPORT_RING_H

#include "daemon.h"
#include "session.h"

/* Set up and stop the polling of daemon @p d's rings (loop thread). */
void transport_ring_init(daemon_t *d);
void transport_ring_close(daemon_t *d);

/* Run what @p s's ring has taken up to its socket requests so far, and
 * poll it from now on if it ran anything. A client that broke the ring
 * closes the session. @return the enum ring_state it stopped at (ring.h),
 * or a negative code (the session is closing). */
int transport_ring_run(session_t *s);

/* The notification ring.kick: poll @p s's ring again, and run it. */
void transport_ring_kick(session_t *s);

/* Has a polled ring a submission the loop has not taken? For the loop's
 * --busy-poll spin, which waits for events without running the loop. */
int transport_rings_pending(daemon_t *d);

/* At the session's teardown: stop polling its ring and close it. */
void transport_ring_forget(session_t *s);

#endif
