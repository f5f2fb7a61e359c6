/* SPDX-License-Identifier: MIT */
/* daemon/compile/compile_pool.h: the daemon's compile helpers.
 *
 * Compiles never run in the daemon, nor on libuv's thread pool: a bounded
 * pool of the daemon's own threads (--compile-jobs) runs them, each thread
 * owning one hipd-compile process (compile_helper.c, the sandbox it sets up
 * is described there): started when the thread first needs it, restarted
 * after it dies. A compile that passes --compile-timeout kills its helper
 * (and with it every compiler it started); only that compile fails, with a
 * message that says so, and the thread starts a fresh helper for the next.
 * A host compiler (the CPU device's) whose processes use no CPU time for
 * --compile-idle-timeout seconds is ended by its helper, which goes on.
 *
 * The pool runs jobs (compile_pool_submit): job->run on a pool thread,
 * where it may block and call compile_run(), then job->done on the loop
 * thread. The kernel cache (kernels/cache.c) runs its misses this way.
 *
 * The compiler ids that key the cache come from the helpers' hello, so the
 * daemon keys entries without loading any compiler itself.
 */
#ifndef HIPD_COMPILE_POOL_H
#define HIPD_COMPILE_POOL_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "util/err.h"

typedef struct {
  unsigned jobs;      /* threads (and helpers); 0: min(4, CPUs) */
  unsigned timeout_s; /* per compile; 0: 120 */
  /* A host compiler whose processes use no CPU time this long is ended
   * (cpu_compile_set_idle_timeout); 0: never. In-process compilers
   * (hiprtc, NVRTC) have only timeout_s. */
  unsigned idle_timeout_s;
  /* The helper program: NULL for $HIPD_COMPILE_HELPER, else hipd-compile
   * next to the daemon's executable if there is one, else the installed
   * $(libexecdir)/hipd-compile. */
  const char *helper;
  /* The account helpers run as when hipd is root: NULL for hipd-compile,
   * else nobody. Never root. */
  const char *user;
  uint64_t mem_limit; /* address space of a helper and of each compiler
                       * process (RLIMIT_AS; with gpu_driver its private
                       * writable memory, RLIMIT_DATA); 0: 4 GiB */
  /* Helpers may open the GPU driver (hipd-compile --gpu-driver): NVRTC's
   * compute cache; off by default. */
  int gpu_driver;
  /* Admission (compile_pool_admit): requests of one tenant outstanding at
   * once (0: 8), and bytes of source all requests may hold (0: 256 MiB),
   * of which one tenant at most half. */
  unsigned tenant_max;
  uint64_t queue_bytes;
  /* Ask the first helper for its hello now (blocking; at start-up, before
   * the loop runs), so that compile_pool_compiler_id() knows the ids and
   * a helper that cannot start stops hipd at once. */
  int probe;
} compile_pool_cfg_t;

/* A piece of work for the pool. The caller owns it (usually embedded in
 * its own struct); it must stay valid until done runs. */
typedef struct compile_job compile_job_t;
struct compile_job {
  void (*run)(compile_job_t *job);  /* a pool thread; may block */
  void (*done)(compile_job_t *job); /* then the loop thread */
  uint32_t tenant;                  /* whose (a uid): tenants take turns */
  compile_job_t *next;              /* the pool's */
};

/* What to compile (compile_run). The strings are borrowed. */
typedef struct {
  const char *driver; /* driver name, "hip" or "cpu" */
  const char *arch;
  const char *source;
  size_t source_len;
  const char *const *names;
  size_t nnames;
  const char *const *opts;
  size_t nopts;
} compile_req_t;

/* The answer: status 0 with a malloc'd image, or a negative code with
 * the compiler's log (or the reason: timed out, the helper died). */
typedef struct {
  int status;
  void *image; /* malloc'd; the caller frees it */
  size_t image_len;
  char *log;    /* the caller's buffer ... */
  size_t logsz; /* ... and its size; filled NUL-terminated */
  /* The compiler's call in its helper, as the helper measured it (0 when
   * it did not answer): wall-clock and the helper's CPU time. */
  uint64_t helper_ns, helper_cpu_ns;
} compile_out_t;

typedef struct {
  unsigned jobs, timeout_s, idle_timeout_s;
  unsigned busy;     /* threads running a job now */
  unsigned queued;   /* jobs waiting for a thread */
  unsigned helpers;  /* helper processes alive now */
  uint64_t started;  /* helper processes started */
  uint64_t restarts; /* of those, started after one had died */
  uint64_t compiles, timeouts, crashes;
  unsigned tenant_max;  /* compile_pool_cfg_t's, as in force */
  uint64_t queue_bytes; /* ditto */
  uint64_t held_bytes;  /* source bytes admitted requests hold now */
  uint64_t refused;     /* requests refused at admission (HIPD_EBUSY) */
  /* The protections of the last helper that said hello: */
  uint32_t fsview; /* CP_FSVIEW_* (compile_proto.h) */
  const char *fsview_name;
  int64_t uid;       /* its uid, -1 before any hello */
  char sandbox[256]; /* what it could not apply, "" if nothing */
} compile_pool_stats_t;

/* Start the pool's threads (no helper yet, unless cfg->probe). Loop thread
 * (@p loop is where job->done runs). @return 0, or a negative code with
 * @p err naming the problem (the helper missing, or failing to start, with
 * cfg->probe). */
int compile_pool_init(const compile_pool_cfg_t *cfg, uv_loop_t *loop,
                      hipd_err_t *err);
/* At shutdown: kill every helper (and so every compile in flight, which
 * fails with HIPD_ESHUTDOWN) and start no more. Any thread; idempotent.
 * @return how many helpers were killed. */
unsigned compile_pool_stop_all(void);
/* After the loop ran out: stop the helpers, join the threads, close the
 * loop handle (loop thread; the loop must still run its close callbacks
 * or be closed right after). Jobs not done are dropped. */
void compile_pool_shutdown(void);

/* Admit a compile request of tenant @p tenant (a uid) that holds @p bytes
 * of source until compile_pool_release(), so that no tenant can queue
 * without bound nor fill the daemon's memory with sources: HIPD_EBUSY
 * with @p err naming the limit when the tenant has tenant_max requests
 * outstanding, its bytes would pass half of queue_bytes, or everyone's
 * would pass queue_bytes. Loop thread. @return 0 or HIPD_EBUSY. */
int compile_pool_admit(uint32_t tenant, uint64_t bytes, hipd_err_t *err);
/* The request admitted for @p tenant with @p bytes is over. Loop thread. */
void compile_pool_release(uint32_t tenant, uint64_t bytes);

/* Queue @p job (job->tenant set). Tenants take turns: a free thread takes
 * the next tenant's oldest job, and a tenant takes the last free helper
 * only when it has no compile running, so that with two or more helpers
 * no tenant can keep another's compile waiting for one. Loop thread.
 * @return 0, or HIPD_ESHUTDOWN (the pool is stopping or was never
 * started: job->done will not run). */
int compile_pool_submit(compile_job_t *job);
/* Jobs submitted whose done has not run yet (loop thread). */
unsigned compile_pool_inflight(void);

/* Compile @p req in the calling pool thread's helper (starting it if
 * needed). Blocking; pool threads only (from job->run). @return
 * out->status: 0; HIPD_ECOMPILE (the compiler failed, timed out or
 * crashed: out->log says which), another code from the driver, or
 * HIPD_ESHUTDOWN, HIPD_EIO (no helper could be started). */
int compile_run(const compile_req_t *req, compile_out_t *out);

/* The compiler id the helpers report for driver @p driver ("g++ 12.2.0",
 * "nvrtc 12.4 ..."), or NULL when they do not compile for it or have not
 * said hello yet. The string stays valid until shutdown. Any thread. */
const char *compile_pool_compiler_id(const char *driver);
/* In a process without helpers (a worker): the id its listener's helpers
 * reported for @p driver, so that it keys requests as the cache does
 * (kernels.h). The first id said for a driver stays. @return 0,
 * HIPD_EINVAL (too long) or HIPD_ELIMIT (too many drivers). */
int compile_pool_set_compiler_id(const char *driver, const char *id);

void compile_pool_get_stats(compile_pool_stats_t *st);

#endif
