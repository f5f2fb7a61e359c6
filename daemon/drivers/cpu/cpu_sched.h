/* SPDX-License-Identifier: MIT */
/* daemon/drivers/cpu/cpu_sched.h: how the CPU kernel runner executes a launch.
 *
 * Part of hipd-cpu-runner only (not of the daemon). A pool of worker
 * threads, one per core, created once, runs the blocks of a launch; each
 * worker runs one block at a time, its GPU threads as fibers (see
 * cpu_sched.c for the fiber and barrier design).
 */
#ifndef HIPD_KERNELS_CPU_SCHED_H
#define HIPD_KERNELS_CPU_SCHED_H

#include <ffi.h>
#include <stddef.h>
#include <stdint.h>

#define HIPD_CPU_ABI_ONLY
#include "hipd_cpu_device.h"

typedef struct sched sched_t;

/* One launch, as the runner has decoded and checked it. */
typedef struct {
  void (*entry)(void);                /* the kernel */
  ffi_cif *cif;                       /* prepared for its signature */
  void **avalues;                     /* argument values, for ffi_call */
  hipd_cpu_ctx_t **(*tls_slot)(void); /* the module's hipd_cpu_tls_slot */
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared; /* dynamic shared memory, bytes (checked <= 64 KiB) */
} sched_launch_t;

/*
 * Start @p nworkers worker threads (0: one per CPU the process may run on).
 * @return 0, or a negative HIPD_E* code with @p err describing it.
 */
int sched_create(unsigned nworkers, sched_t **out, char *err, size_t errsz);
/* Stop and join the workers and free everything. */
void sched_destroy(sched_t *s);
unsigned sched_workers(const sched_t *s);

/*
 * Run launch @p l to completion on the workers (the calling thread waits).
 * While it waits it watches @p watch_fd: if the peer hangs up (the daemon
 * died), the process exits. @return 0, or a negative HIPD_E* code with
 * @p err describing it (a fiber stack could not be allocated).
 */
int sched_run(sched_t *s, const sched_launch_t *l, int watch_fd, char *err,
              size_t errsz);

#endif
