/* SPDX-License-Identifier: MIT */
/* daemon/kernels/kernels.h: compiled kernels: compile through the cache,
 * load once per device, hand out per-session kernel objects.
 *
 * A loaded module is shared by every session that compiled the same
 * binary for the same device (keyed by the cache key); a kernel_t is one
 * session's handle to a kernel in it. Compilation runs on the cache's pool
 * threads, loading and lookups on the device's service executor: the loop
 * thread never waits for either. Loop-thread only.
 */
#ifndef HIPD_KERNELS_H
#define HIPD_KERNELS_H

#include "compile/compile_pool.h"
#include "device.h"
#include "kernels/cache.h"

typedef struct module_ref module_ref_t;

typedef struct kernel {
  device_t *dev;
  module_ref_t *mod;
  void *fn;             /* the driver's kernel */
  drv_sig_t sig;        /* declared parameters, where known */
  uint32_t max_threads; /* launch bound of a generated kernel, 0: none */
  char name[256];
  int refs; /* the session's handle + launches in flight */
} kernel_t;

/* Bumped when the CPU device header or the HIP preludes change: part of
 * every cache key. */
#define KERNELS_PRELUDE_VERSION "hipd-prelude-1"

/* What to compile. The strings are copied. */
typedef struct {
  const char *source;
  size_t source_len;
  const char *name; /* the kernel to make launchable */
  const char *const *opts;
  size_t nopts;
  device_t *dev;    /* the target device, or NULL ... */
  const char *arch; /* ... with a target architecture */
  int refresh;      /* compile even if cached (kernel.compile) */
  const char *lang; /* "hip" (or NULL) or "cuda" (kernels/lang.h) */
  /* A kernel hipd generated (kernel.compile_ir): its parameter list, which
   * launches are checked against, and its launch bound (0: none). Where
   * the driver also knows the declaration, the two must agree. */
  const drv_sig_t *sig;
  uint32_t max_threads;
  uint32_t tenant; /* the session's uid: admission and turns on the
                    * compile pool, where this process has it */
} kernel_request_t;

typedef struct {
  int status;
  const char *error;    /* message on failure (includes the log) */
  cache_source_t cache; /* where the binary came from */
  cache_key_t key;
  size_t bytes;      /* binary size */
  double compile_ms; /* request to answer, on the loop */
  /* Where that time went (cache_timing_t: the pool's queue, the compile,
   * the disk), then the module's load and the kernel's lookup on the
   * device; the rest is the way there and back (the listener's, for a
   * worker). */
  double wait_ms, compiler_ms, disk_ms, load_ms;
  double helper_ms, helper_cpu_ms; /* of compiler_ms: in the helper */
  kernel_t *kernel;                /* with a device: a new kernel (1 ref) */
} kernel_result_t;

typedef void (*kernel_done_fn)(void *ctx, const kernel_result_t *res);

/* Compile (or find) and, with a device, load and look up the kernel; then
 * @p done(ctx, result) on the loop thread. */
void kernel_build(const kernel_request_t *req, kernel_done_fn done, void *ctx);

/* The device context generation the kernel was loaded in. */
uint32_t kernel_epoch(const kernel_t *k);
void kernel_ref(kernel_t *k);
void kernel_unref(kernel_t *k);

/* The driver that compiles for @p arch, or NULL. */
driver_t *kernels_driver_for_arch(const char *arch);
/* The driver compiled in under @p name ("hip", "cpu"), or NULL. */
const driver_t *kernels_driver_named(const char *name);

/* Everything that makes a binary what it is: the cache key's input. */
typedef struct {
  const char *source;
  size_t source_len;
  const char *name;
  const char *const *opts;
  size_t nopts;
  const char *arch;
  const driver_t *drv;
  int64_t owner; /* -1: an entry for everyone; else the uid whose entry it
                  * is (--cache-scope tenant), which is then in the key */
} kernels_key_in_t;

/* The cache key of @p in (SHA-256 over every field, the driver's platform
 * and compiler, and KERNELS_PRELUDE_VERSION). @return 0, HIPD_ENOMEM or
 * HIPD_EIO (no digest). Any thread. */
int kernels_key(const kernels_key_in_t *in, cache_key_t *out);

/* Compile for @p arch with @p drv's compiler (blocking: a pool thread).
 * The cache_compile_fn contract: 0 with *out and *len set, or a negative code
 * with the compiler's log in @p log; @p timing's helper_ns and helper_cpu_ns
 * set from the helper's answer. */
int kernels_compile(const driver_t *drv, const char *arch, const char *src,
                    size_t len, const char *const *names, size_t nnames,
                    const char *const *opts, size_t nopts, void **out,
                    size_t *outlen, char *log, size_t logsz,
                    cache_timing_t *timing);

/* Where compiled binaries come from. By default the cache of this process
 * (cache.h), compiling on a miss; a worker process (privsep: worker.c)
 * asks its listener instead. @p done runs on the loop thread, as for
 * cache_get_flags(). */
typedef struct {
  /* This process's key of the request; a fetch from another process's
   * cache replaces it with that cache's key before @p done runs. */
  cache_key_t *key;
  int refresh;
  const driver_t *drv;
  const char *arch;
  const char *source;
  size_t source_len;
  const char *name;
  const char *const *opts;
  size_t nopts;
  uint32_t tenant; /* kernel_request_t's; a worker's listener uses the
                    * worker's uid instead */
} kernels_fetch_t;
typedef void (*kernels_fetch_fn)(const kernels_fetch_t *req, cache_done_fn done,
                                 void *ctx);
void kernels_set_fetch(kernels_fetch_fn fn);
/* A request whose binary is loaded already on its device (its key's
 * module, ready, in the device's current context) is answered from that
 * module without asking the cache (kernel_result_t.cache
 * CACHE_HIT_MEMORY); @p fn tells the cache of the use (its place in the
 * LRU order, its hit count): by default cache_touch() here, a worker
 * tells its listener. A kernel.compile (refresh) always asks. */
typedef void (*kernels_touch_fn)(const cache_key_t *key);
void kernels_set_touch(kernels_touch_fn fn);
/* The cache was emptied (cache.clear): the modules loaded so far answer
 * no request without it again. */
void kernels_cache_cleared(void);
/* Load @p image, the cache's entry @p key, on every GPU of this process
 * in @p devmask (bit = device id) that does not have it, ahead of any
 * request (a new worker's, from its listener's warm entries): each stays
 * loaded and idle, as a kernel's module does after its last kernel goes,
 * older than any module a request left idle, so that it is unloaded
 * first when room is needed; none while 32 modules (half the idle ones)
 * are idle or preloading. One preload loads at a time on a device, the
 * others wait in order (a session's work on the device's service executor
 * waits behind one at most). A GPU whose driver does not take the image
 * (another platform or architecture) loads nothing. @return how many
 * loads started or wait, or HIPD_ENOMEM. */
int kernels_preload(const cache_key_t *key, const void *image, size_t len,
                    uint64_t devmask);
/* How many modules kernels_preload() loaded so far. */
uint64_t kernels_preloaded(void);
/* How many requests were answered from a loaded module without the
 * cache. */
uint64_t kernels_hits_loaded(void);

/* --cache-scope tenant: this process keys a request's entry with its
 * tenant (kernel_request_t.tenant); 0: shared entries. */
void kernels_set_cache_per_tenant(int on);

/* The shared cache's counters and its clearing, where the cache is: here,
 * or (a worker) in the listener. @p done runs on the loop thread, at once
 * or later. */
typedef void (*kernels_stats_done_fn)(void *ctx, int status,
                                      const cache_stats_t *st);
typedef void (*kernels_clear_done_fn)(void *ctx, int status, const char *msg);
void kernels_cache_stats(kernels_stats_done_fn done, void *ctx);
void kernels_cache_clear(uid_t uid, kernels_clear_done_fn done, void *ctx);
/* The compile pool's counters, where the pool is. */
typedef void (*kernels_cstats_done_fn)(void *ctx, int status,
                                       const compile_pool_stats_t *st);
void kernels_compile_stats(kernels_cstats_done_fn done, void *ctx);
void kernels_set_cache_remote(void (*stats)(kernels_stats_done_fn, void *),
                              void (*clear)(uid_t, kernels_clear_done_fn,
                                            void *),
                              void (*cstats)(kernels_cstats_done_fn, void *));

#endif
