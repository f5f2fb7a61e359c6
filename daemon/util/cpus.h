/* SPDX-License-Identifier: MIT */
/* daemon/util/cpus.h: how many CPUs this process may run on, and how a
 * thread that spins on one lets its sibling hyperthread run.
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

/* One step of a spin-wait: tells the CPU that this is one (x86 `pause`,
 * arm64 `yield`), so that it lends the core to its other hardware thread
 * and leaves the loop without a memory-order flush when the awaited word
 * changes. */
static inline void util_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

#endif
