/* SPDX-License-Identifier: MIT */
/* daemon/util/ratelimit.c: token buckets by key (ratelimit.h). */
#include "config.h"

#include <stddef.h>

#include "util/ratelimit.h"

int ratelimit_take(ratelimit_t *rl, long long key, uint64_t now_ns, double rate,
                   double burst, uint64_t *denied)
{
  int slot = -1, victim = 0, ok;

  if (denied != NULL)
    *denied = 0;
  for (int i = 0; i < RATELIMIT_SLOTS; i++) {
    if (rl->b[i].used && rl->b[i].key == key) {
      slot = i;
      break;
    }
    /* Else the first free slot, or the least recently used. */
    if (rl->b[victim].used &&
        (!rl->b[i].used || rl->b[i].last_ns < rl->b[victim].last_ns))
      victim = i;
  }
  if (slot < 0) {
    slot = victim;
    rl->b[slot].used = 1;
    rl->b[slot].key = key;
    rl->b[slot].tokens = burst;
    rl->b[slot].denied = 0;
  } else if (now_ns > rl->b[slot].last_ns) {
    rl->b[slot].tokens += (double)(now_ns - rl->b[slot].last_ns) / 1e9 * rate;
    if (rl->b[slot].tokens > burst)
      rl->b[slot].tokens = burst;
  }
  rl->b[slot].last_ns = now_ns;
  ok = rl->b[slot].tokens >= 1;
  if (ok) {
    rl->b[slot].tokens -= 1;
    if (denied != NULL)
      *denied = rl->b[slot].denied;
    rl->b[slot].denied = 0;
  } else {
    rl->b[slot].denied++;
  }
  return ok;
}
