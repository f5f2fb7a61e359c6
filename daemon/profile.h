/* SPDX-License-Identifier: MIT */
/* daemon/profile.h: a session's profiling records.
 *
 * Owns the records of one profiling period (profile.enable to
 * profile.disable) and nothing else: plain values (op name, stream handle,
 * bytes, start and duration) that methods/ feed from an operation's
 * completion. It never sees calls, sessions or device objects; the
 * session holds the profile_t and resources.c frees it at close. Loop
 * thread only.
 */
#ifndef HIPD_PROFILE_H
#define HIPD_PROFILE_H

#include <stdint.h>

typedef struct profile_rec {
  const char *op;  /* static name: "mem.write", "mem.read"... */
  uint64_t stream; /* stream handle */
  uint64_t bytes;
  double start_ms; /* since profiling was enabled */
  double end_ms;
} profile_rec_t;

typedef struct profile {
  uint64_t epoch_ns; /* util_now_ns() when profiling was enabled */
  uint32_t gen;      /* which enable this is (ops from earlier ones are
                        not recorded) */
  profile_rec_t *recs;
  uint32_t count, cap;
  uint64_t dropped; /* records past the cap (or past the memory) */
} profile_t;

#define PROFILE_MAX_RECORDS (1u << 20)

/* Start profiling into *@p p unless it is on already (then nothing
 * changes); *@p periods counts the periods and names the new one.
 * @return 0 or HIPD_ENOMEM. */
int profile_enable(profile_t **p, uint32_t *periods);
/* Stop profiling and discard the records; *@p p becomes NULL. */
void profile_disable(profile_t **p);

/* The period an operation requested now belongs to (0: not profiling). */
static inline uint32_t profile_period(const profile_t *p)
{
  return p != NULL ? p->gen : 0;
}

/* Record an operation of period @p gen that the device timed: submitted
 * at @p start_ns (util_now_ns()), lasting @p device_ms. Ignored when @p p
 * is NULL or in another period; counted in dropped past the cap. */
void profile_record(profile_t *p, uint32_t gen, const char *op, uint64_t stream,
                    uint64_t bytes, uint64_t start_ns, float device_ms);

#endif
