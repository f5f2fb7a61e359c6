/* SPDX-License-Identifier: MIT */
/* daemon/util/cpus.h: how many CPUs this process may run on.
 *
 * Header-only, like clock.h, so that the daemon (the spin budget, the
 * devices' stream pools) and hipd-cpu-runner (its kernel threads) count
 * them the one way. */
#ifndef HIPD_UTIL_CPUS_H
#define HIPD_UTIL_CPUS_H

#include <sched.h>
#include <unistd.h>

/* The CPUs of this process's affinity mask, else the online ones; at
 * least 1. Thread-safe. */
static inline unsigned util_cpus(void)
{
  cpu_set_t set;
  long n;

  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
    return (unsigned)CPU_COUNT(&set);
  n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (unsigned)n : 1;
}

#endif
