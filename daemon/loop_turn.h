/* SPDX-License-Identifier: MIT */
/* daemon/loop_turn.h: whether the loop blocks in its next poll.
 *
 * Prepare callbacks that leave something awake without an event the loop
 * waits for (a polled ring, whose client rings no doorbell; the loop's
 * own launches, whose device does not wake it) must know whether the
 * loop will block, and be sure of the answer. libuv's uv_backend_timeout()
 * is not: it says 0 while a watcher changed since the last poll, and
 * uv_run() then blocks until the next timer all the same (libuv 1.44,
 * src/unix/core.c). Here, an answer of "it will not block" is made true
 * with an idle handle active for one turn.
 */
#ifndef HIPD_LOOP_TURN_H
#define HIPD_LOOP_TURN_H

#include "daemon.h"

/* Set up and close @p d's idle handle (d->loop_awake): transport_init()
 * and transport_close(), before the loop first runs and at shutdown.
 * Loop thread. */
void loop_turn_init(daemon_t *d);
void loop_turn_close(daemon_t *d);

/* In a prepare callback: may the loop block in this turn's poll? 0 only
 * when it will not, and then that holds whatever a later callback of the
 * phase does. Loop thread. */
int loop_turn_may_block(daemon_t *d);

/* Keep the loop from blocking in this turn's poll, if it has not polled
 * yet (a prepare callback); from a later phase of the turn, the next
 * turn's idle phase ends it before that turn polls, and that turn's
 * prepare callbacks decide again. Nothing once loop_turn_close() ran.
 * Loop thread. */
void loop_turn_stay_awake(daemon_t *d);

#endif
