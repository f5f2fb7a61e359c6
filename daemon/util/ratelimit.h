/* SPDX-License-Identifier: MIT */
/* daemon/util/ratelimit.h: token buckets by key (a uid), the one rate
 * limiter of hipd: the log's lines about a tenant (log.c) and the
 * refusals the access policy answers (policy.c).
 *
 * A fixed table of RATELIMIT_SLOTS buckets; a key without one takes the
 * least recently used, full. So a key's bucket is only forgotten (and
 * refilled) after RATELIMIT_SLOTS other keys were seen since its last
 * take. A zeroed ratelimit_t is empty and ready. Not locked: the caller
 * serialises. */
#ifndef HIPD_UTIL_RATELIMIT_H
#define HIPD_UTIL_RATELIMIT_H

#include <stdint.h>

#define RATELIMIT_SLOTS 64

typedef struct {
  struct {
    int used;         /* 0: free */
    long long key;    /* whose */
    double tokens;    /* takes it may make now */
    uint64_t last_ns; /* of its last take (or refused one) */
    uint64_t denied;  /* takes refused since its last allowed one */
  } b[RATELIMIT_SLOTS];
} ratelimit_t;

/* One take for @p key at @p now_ns (util_now_ns()), from a bucket of
 * @p burst tokens refilled at @p rate a second. @return 1 with the takes
 * refused since its last allowed one in *@p denied (may be NULL), or 0
 * (counted for the next allowed one). */
int ratelimit_take(ratelimit_t *rl, long long key, uint64_t now_ns, double rate,
                   double burst, uint64_t *denied);

#endif
