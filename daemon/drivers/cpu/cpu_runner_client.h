/* SPDX-License-Identifier: MIT */
/* daemon/drivers/cpu/cpu_runner_client.h: the daemon's side of the CPU device's
 * kernel runner (hipd-cpu-runner).
 *
 * A cpu_runner_t owns one runner process, started with posix_spawn (or by
 * the launcher of cpu_launcher.h when one runs), and the record of what
 * the runner must hold: the buffer chunks and mappings, the loaded modules
 * and the kernels looked up in them. When the runner dies (a kernel
 * crashed, called exit, or ran past the launch timeout), the request that
 * was in flight fails with a message naming the cause, the child is
 * reaped, and a new runner is started and given every mapping, module and
 * kernel again, with the same ids; buffers survive because the daemon
 * holds their memfds. If that restart fails, the next request tries again.
 *
 * Thread safety: every function may be called from any thread. A launch
 * holds one runner process for as long as it runs, and nothing else waits
 * for it: a second launch meanwhile starts a second process (up to four,
 * each given the whole record), and a change to the record (a mapping, a
 * module, a kernel) is made at once in the processes that are not running
 * a launch and, in one that is, before its next request (a log of the
 * changes it missed). So a long or endless kernel on one stream stops
 * neither allocations nor launches on others. A buffer unmapped while a
 * launch still runs keeps its pages in that process until the launch
 * ends; cpu_runner_bunmap() says so, and its range is handed back by
 * cpu_runner_reclaim() only then, so that a kernel never reaches memory
 * given to another buffer.
 *
 * Errors: 0 or a negative HIPD_E* code, which @p err (not NULL) also
 * holds, with a message that names the problem (cleared on success).
 */
#ifndef HIPD_KERNELS_CPU_RUNNER_CLIENT_H
#define HIPD_KERNELS_CPU_RUNNER_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cpu_proto.h"
#include "drivers/driver_output.h"
#include "util/err.h"

typedef struct cpu_runner cpu_runner_t;

typedef struct {
  /* The runner binary: NULL for $HIPD_CPU_RUNNER, else the installed
   * $(libexecdir)/hipd-cpu-runner. */
  const char *path;
  /* Worker threads: 0 for one per CPU. */
  unsigned workers;
  /* A launch (or a module load, which runs the module's constructors)
   * that takes longer is stopped by killing the runner: 0 for no limit. */
  unsigned timeout_ms;
  /* Optional: the address range the daemon allocates CPU device buffers
   * in; the runner reserves it at start so that buffers can always be
   * mapped at their daemon address. 0/0 for none. */
  void *reserve_addr;
  size_t reserve_size;
  /* When this process is root and starts the runner itself (no launcher),
   * the runner changes to uid/gid before it serves anything (its
   * --uid/--gid); neither may be 0. Ignored otherwise: a runner started
   * by the launcher is the launcher's uid, one started by an unprivileged
   * process is that process's. */
  int drop_ids;
  uid_t uid;
  gid_t gid;
} cpu_runner_cfg_t;

/* A kernel's declared parameters, as the runner reports them. */
typedef struct {
  uint32_t nargs;
  uint8_t types[CPU_MAX_ARGS]; /* HIPD_CPU_T_* (see cpu_arg_type_name) */
} cpu_kernel_sig_t;

/**
 * Start a runner. It runs sandboxed (cpu_runner.c): the environment it
 * gets is a clean one (sandbox_clean_env), its working directory "/", and
 * it opens no file of ours (modules travel as descriptors).
 * @param cfg settings (copied); NULL for the defaults.
 * @param out the new runner, released with cpu_runner_stop().
 * @return 0, HIPD_ENOENT/HIPD_EIO (the binary cannot be started),
 *         HIPD_EVERSION (a runner of another build), HIPD_ENOMEM.
 */
int cpu_runner_start(const cpu_runner_cfg_t *cfg, cpu_runner_t **out,
                     hipd_err_t *err);

/** Stop the runner process (it exits when its socket closes; it is killed
 *  if it does not within 2 s) and free @p r. Buffers' fds are not closed:
 *  they belong to the caller. NULL is a no-op. */
void cpu_runner_stop(cpu_runner_t *r);

/**
 * Map buffer [@p addr, @p addr + @p size), backed by memfd @p fd, at the
 * same address in the runner.
 * @p fd stays the caller's; it must stay open until cpu_runner_unmap(),
 * because a restarted runner is given it again. Unmap before freeing the
 * buffer: a stale mapping would block a later buffer at that address.
 * @return 0, HIPD_EBUSY (the range is in use in the runner), HIPD_EEXIST
 *         (overlaps a mapped buffer), HIPD_EINVAL (unaligned, empty, or
 *         the file is smaller than @p size).
 */
int cpu_runner_map(cpu_runner_t *r, int fd, void *addr, size_t size,
                   hipd_err_t *err);

/** Remove the mapping made at @p addr. @return 0 or HIPD_ENOENT. */
int cpu_runner_unmap(cpu_runner_t *r, void *addr, hipd_err_t *err);

/**
 * Give the runner buffer chunk @p id: memfd @p fd, which spans
 * [@p addr, @p addr + @p size) in the caller (page-aligned; the runner
 * holds the range PROT_NONE, inside cfg.reserve_addr/size or else where it
 * is free). The runner keeps its own descriptor of the file, one per chunk.
 * @p fd stays the caller's and must stay open while the runner lives (a
 * restarted runner is given it again); chunks are never removed.
 * @return 0, HIPD_EEXIST (@p id known, or the range overlaps a chunk or a
 *         mapping), HIPD_EBUSY (the range is in use in the runner),
 *         HIPD_ELIMIT (CPU_MAX_CHUNKS), HIPD_EINVAL.
 */
int cpu_runner_chunk(cpu_runner_t *r, uint32_t id, int fd, void *addr,
                     size_t size, hipd_err_t *err);

/**
 * Map @p n buffers of chunk @p chunk in the runner: each entry the file
 * range [offset, offset + size) (whole pages) at the chunk's address +
 * offset. The caller keeps them apart and never maps a range twice; the
 * runner checks only that they lie in the chunk. They go CPU_BMAP_MAX to
 * a request; on failure, those of the failed request are neither mapped
 * nor on record, those of the requests before stay (none when @p n <=
 * CPU_BMAP_MAX).
 * @return 0, HIPD_ENOENT (unknown chunk), HIPD_EINVAL, HIPD_ENOMEM.
 */
int cpu_runner_bmap(cpu_runner_t *r, uint32_t chunk, const cpu_bmap_ent_t *ents,
                    size_t n, hipd_err_t *err);

/**
 * Unmap the buffer of @p chunk mapped at @p offset (its range is PROT_NONE
 * in the runner again). Linear in the number of buffers on record.
 * @param released set to 1 when no runner process maps it any more, so its
 *        range may be reused now; 0 when a process running a launch still
 *        does until that launch ends: cpu_runner_reclaim() gives the offset
 *        back then, and the range must not be reused before.
 * @return 0 or HIPD_ENOENT.
 */
int cpu_runner_bunmap(cpu_runner_t *r, uint32_t chunk, uint64_t offset,
                      int *released, hipd_err_t *err);

/** Offsets of @p chunk (at most @p max, into @p offsets) that
 *  cpu_runner_bunmap() held back and that no process maps any more; each
 *  is given once. @return how many. */
size_t cpu_runner_reclaim(cpu_runner_t *r, uint32_t chunk, uint64_t *offsets,
                          size_t max);

/**
 * Load the kernel module (a shared object from cpu_compile()) at
 * @p so_path: this process opens it and passes the descriptor, so the
 * runner needs no access to the file. The file must stay in place until
 * cpu_runner_unload(): a restarted runner loads it again.
 * @param module receives the module's id.
 * @return 0, HIPD_EIO (dlopen failed: its message), HIPD_EINVAL (not a
 *         kernel module), HIPD_EVERSION (another CPU device ABI),
 *         HIPD_EDEVICE (its constructors crashed the runner).
 */
int cpu_runner_load(cpu_runner_t *r, const char *so_path, uint32_t *module,
                    hipd_err_t *err);

/** Unload a module and forget its kernels. @return 0 or HIPD_ENOENT. */
int cpu_runner_unload(cpu_runner_t *r, uint32_t module, hipd_err_t *err);

/**
 * Look kernel @p name up in @p module (it must have been named when the
 * module was compiled). Looking the same name up again returns the same id.
 * @param kernel receives the kernel's id.
 * @param sig receives its declared parameter types (may be NULL).
 * @return 0, HIPD_ENOENT (no such module), HIPD_ENOKERNEL.
 */
int cpu_runner_kernel(cpu_runner_t *r, uint32_t module, const char *name,
                      uint32_t *kernel, cpu_kernel_sig_t *sig, hipd_err_t *err);

/**
 * Run kernel @p kernel over @p grid blocks of @p block threads with
 * @p shared bytes of dynamic shared memory, and wait for it to complete.
 * @param args one value per declared parameter, in the member that its
 *        type selects (see cpu_arg_t).
 * @return 0; HIPD_ESIGNATURE (@p nargs differs from the kernel's);
 *         HIPD_ELIMIT (geometry or shared memory past the device's limits);
 *         HIPD_ENOKERNEL; HIPD_ELAUNCH when the kernel crashed the runner
 *         ("kernel crashed on the CPU device: SIGSEGV (segmentation
 *         fault)") or ended it; HIPD_ETIMEDOUT past the configured timeout.
 *         After HIPD_ELAUNCH/HIPD_ETIMEDOUT a new runner is in place.
 * What the kernel printed is appended to @p out (NULL: dropped).
 */
int cpu_runner_launch(cpu_runner_t *r, uint32_t kernel, const uint32_t grid[3],
                      const uint32_t block[3], uint32_t shared,
                      const cpu_arg_t *args, uint32_t nargs, drv_output_t *out,
                      hipd_err_t *err);

/** The first runner process's id (-1 when none is running). */
int cpu_runner_pid(cpu_runner_t *r);
/** How many runner processes are running (1 unless launches overlapped). */
unsigned cpu_runner_procs(cpu_runner_t *r);
/* Kill every runner process running a launch now (those launches fail as
 * killed; new processes take their place). Any thread, without the
 * runner's lock. @return 1 if it was killed, else 0. */
int cpu_runner_abort(cpu_runner_t *r);
/** How many times the runner was restarted after it died. */
unsigned cpu_runner_restarts(cpu_runner_t *r);
/** The runner's worker threads (0 when none is running). */
unsigned cpu_runner_workers(cpu_runner_t *r);

#endif
