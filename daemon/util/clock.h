/* SPDX-License-Identifier: MIT */
/* daemon/util/clock.h: the one monotonic clock of hipd's programs.
 *
 * Header-only, so that every program may use it without linking anything:
 * the daemon (every layer), hipd-cpu-runner and bench/. Not the kernel
 * header hipd_cpu_device.h, which is force-included into user kernels and
 * must stand alone (its clock64() keeps its own call). */
#ifndef HIPD_UTIL_CLOCK_H
#define HIPD_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds. Thread-safe. */
static inline uint64_t util_now_ns(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC in milliseconds. Thread-safe. */
static inline uint64_t util_now_ms(void)
{
  return util_now_ns() / 1000000u;
}

/* The CPU time of the whole calling process (every thread, not its
 * children) in nanoseconds: CLOCK_PROCESS_CPUTIME_ID. Thread-safe. */
static inline uint64_t util_cpu_ns(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
