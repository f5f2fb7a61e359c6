/* SPDX-License-Identifier: MIT */
/* daemon/loop_turn.c: whether the loop blocks in its next poll. See
 * loop_turn.h. */
#include "config.h"

#include "loop_turn.h"

/* One turn: the idle phase after the poll it kept from blocking. */
static void loop_awake_cb(uv_idle_t *h)
{
  uv_idle_stop(h);
}

void loop_turn_init(daemon_t *d)
{
  uv_idle_init(d->loop, &d->loop_awake);
  d->loop_awake.data = d;
}

void loop_turn_close(daemon_t *d)
{
  uv_idle_stop(&d->loop_awake);
  uv_close((uv_handle_t *)&d->loop_awake, NULL);
}

void loop_turn_stay_awake(daemon_t *d)
{
  /* Not once closed (shutdown): a started closing handle would keep the
   * loop alive for good. The loop then runs its closing handles without
   * blocking anyway. */
  if (!uv_is_closing((uv_handle_t *)&d->loop_awake))
    uv_idle_start(&d->loop_awake, loop_awake_cb);
}

int loop_turn_may_block(daemon_t *d)
{
  if (d->loop_nowait)
    return 0; /* UV_RUN_NOWAIT */
  if (uv_backend_timeout(d->loop) != 0)
    return 1;
  loop_turn_stay_awake(d);
  return 0;
}
