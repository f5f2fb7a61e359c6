/* SPDX-License-Identifier: MIT */
/* daemon/transport.h: the connections' I/O and the loop's safe points.
 *
 * The transport accepts a connection into a new session (session.h),
 * reads its bytes, frames and decodes requests (proto/) and hands each to
 * dispatch, in order, pausing while the session has --max-inflight
 * requests unanswered; it writes the replies the session gathered, once
 * per session per loop iteration; it enforces the time limits; and at its
 * safe points, in the loop's check and prepare phases, it writes replies,
 * resumes throttled sessions and tears closed ones down.
 */
#ifndef HIPD_TRANSPORT_H
#define HIPD_TRANSPORT_H

#include <stdint.h>
#include <uv.h>

#include "daemon.h"

/* Accept a new connection from @p server_stream. Logs and drops it on
 * failure (too many sessions, out of memory). */
void transport_accept(daemon_t *d, uv_stream_t *server_stream);

/* Start/stop the safe points of daemon @p d (its check and prepare
 * handles, and loop_turn.h's idle handle). Loop thread; transport_close()
 * at shutdown. */
void transport_init(daemon_t *d);
void transport_close(daemon_t *d);

/* Close sessions that broke a time limit: no write progress
 * (--write-timeout), no hello (--hello-timeout), a request left incomplete
 * (--request-timeout). Loop thread, from the housekeeping timer. */
void transport_check_timeouts(daemon_t *d);

/* Shutdown: close the sessions with nothing in flight and no reply
 * unwritten (all of them if @p force), and tear down those closed so far.
 * From a timer (a safe point). @return the sessions left: live ones and
 * any whose teardown is still to come. */
uint32_t transport_idle_close(daemon_t *d, int force);

#endif
