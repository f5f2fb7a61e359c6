/* SPDX-License-Identifier: MIT */
/* daemon/profile.c: a session's profiling records: enable, disable,
 * record. Called by methods/ (profile.*, the op completions) and
 * resources.c (at close); calls nothing but the clock (util_now_ns). */
#include "config.h"

#include <stdlib.h>

#include "executor.h"
#include "profile.h"
#include "rpc.h"
#include "util/array.h"
#include "util/clock.h"

int profile_enable(profile_t **p, uint32_t *periods)
{
  if (*p != NULL)
    return 0;
  *p = calloc(1, sizeof(**p));
  if (*p == NULL)
    return HIPD_ENOMEM;
  (*p)->epoch_ns = util_now_ns();
  (*p)->gen = ++*periods;
  return 0;
}

void profile_disable(profile_t **p)
{
  if (*p == NULL)
    return;
  free((*p)->recs);
  free(*p);
  *p = NULL;
}

void profile_record(profile_t *p, uint32_t gen, const char *op, uint64_t stream,
                    uint64_t bytes, uint64_t start_ns, float device_ms)
{
  profile_rec_t *r;

  if (p == NULL || p->gen != gen)
    return;
  if (p->count == PROFILE_MAX_RECORDS ||
      ARRAY_GROW(p->recs, p->count, p->cap, 256) != 0) {
    p->dropped++;
    return;
  }
  r = &p->recs[p->count++];
  r->op = op;
  r->stream = stream;
  r->bytes = bytes;
  r->start_ms = (double)(start_ns - p->epoch_ns) / 1e6;
  r->end_ms = r->start_ms + device_ms;
}
